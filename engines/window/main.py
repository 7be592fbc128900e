#!/usr/bin/python3
"""The `window` context engine for contextd: a sliding window over the host's transcript.

    /usr/bin/python3 engines/window/main.py        (from anywhere: paths resolve from this file)

Environment (see README.md):
  CONTEXTD_REGISTRY           contextd's address; unset: serve without registering
  CONTEXTD_OWNER              the owner to register for (required with CONTEXTD_REGISTRY)
  CONTEXTD_OWNER_TOKEN        proves the owner: sent as `authorization: Bearer <token>`
  CONTEXTD_ENGINE_LISTEN      where to serve, host:port or unix:/path (default 127.0.0.1:0: any free port)
  CONTEXTD_ENGINE_ADVERTISE   the endpoint to register when the registry must dial another address
  WINDOW_MAX_TURNS            keep at most this many turns (default 0: as many as fit the budget)
  WINDOW_HEARTBEAT_MS         registration heartbeat (default 2000)
  WINDOW_GRACE_MS             how long in-flight calls may finish on SIGTERM (default 5000)
  WINDOW_PARENT_PID           stop (gracefully) when this process is gone, for supervisors and tests
  WINDOW_LOG_LEVEL / CONTEXTD_LOG_LEVEL   debug | info | warn | error (default info)

Logs are JSON lines on stderr. The first line after start-up is {"msg":"listening","address":...}.
Exit codes: 0 after SIGTERM/SIGINT, 2 for bad configuration or when the address cannot be bound,
3 when the gRPC stubs cannot be generated.
"""

import os
import signal
import sys
import threading
import time
from concurrent import futures

# gRPC core writes its own plain-text diagnostics to stderr; this engine logs JSON lines only, unless
# GRPC_VERBOSITY asks for gRPC's (must be set before grpc is imported).
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from jsonlog import JsonLogger  # noqa: E402

log = JsonLogger()

import generate_stubs  # noqa: E402

try:
    generate_stubs.import_path()
except (generate_stubs.StubError, OSError) as e:
    log.error("cannot generate the gRPC stubs", reason=str(e))
    sys.exit(3)

import grpc  # noqa: E402

from contextd.v1 import engine_pb2_grpc  # noqa: E402
from health.v1 import health_pb2_grpc  # noqa: E402
from host_client import HostClient  # noqa: E402
from registration import Registrar  # noqa: E402
from window_engine import ENGINE_ID, PROTOCOL_VERSIONS, Health, WindowEngine  # noqa: E402

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1", "[::]": "::1"}


class ConfigError(Exception):
    pass


def _env(name, default=""):
    return (os.environ.get(name) or "").strip() or default


def _int_env(name, default, minimum=0):
    raw = _env(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError("%s must be an integer, got %r" % (name, raw))
    if value < minimum:
        raise ConfigError("%s must be >= %d, got %d" % (name, minimum, value))
    return value


def load_config():
    cfg = {
        "registry": _env("CONTEXTD_REGISTRY"),
        "owner": _env("CONTEXTD_OWNER"),
        "owner_token": _env("CONTEXTD_OWNER_TOKEN"),
        "listen": _env("CONTEXTD_ENGINE_LISTEN", "127.0.0.1:0"),
        "advertise": _env("CONTEXTD_ENGINE_ADVERTISE"),
        "max_turns": _int_env("WINDOW_MAX_TURNS", 0),
        "heartbeat_s": _int_env("WINDOW_HEARTBEAT_MS", 2000, 1) / 1000.0,
        "grace_s": _int_env("WINDOW_GRACE_MS", 5000) / 1000.0,
        "parent_pid": _int_env("WINDOW_PARENT_PID", 0),
    }
    if cfg["registry"] and not cfg["owner"]:
        raise ConfigError("CONTEXTD_REGISTRY is set but CONTEXTD_OWNER is not: registering needs an owner (and usually CONTEXTD_OWNER_TOKEN)")
    return cfg


def split_host_port(listen):
    """host, port of host:port or [v6]:port (None for unix:)."""
    if listen.startswith("unix:"):
        return None
    if listen.startswith("["):
        host, sep, port = listen[1:].partition("]:")
    else:
        host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError("CONTEXTD_ENGINE_LISTEN %r is not host:port, [ipv6]:port or unix:/path" % listen)
    return host, int(port)


def bind(server, cfg):
    """Binds the server; returns (address, endpoint to register)."""
    listen = cfg["listen"]
    parsed = split_host_port(listen)
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as e:  # grpcio >= 1.5x raises instead of returning 0
        raise ConfigError("cannot listen on %s: %s" % (listen, e))
    if port == 0:
        raise ConfigError("cannot listen on %s (address in use or not permitted)" % listen)
    if parsed is None:
        return listen, cfg["advertise"] or listen
    host, _ = parsed
    fmt = "[%s]:%d" if ":" in host else "%s:%d"
    address = fmt % (host, port)
    if cfg["advertise"]:
        return address, cfg["advertise"]
    loopback = WILDCARDS.get(host)
    if loopback:
        log.warn("listening on a wildcard address: registering %s; set CONTEXTD_ENGINE_ADVERTISE if the registry runs elsewhere" % loopback, listen=listen)
        return address, ("[%s]:%d" if ":" in loopback else "%s:%d") % (loopback, port)
    return address, address


def watch_parent(pid, stop):
    while not stop.wait(0.5):
        if os.getppid() != pid:
            log.warn("the parent process is gone; stopping", parent_pid=pid)
            stop.set()
            return


def main():
    try:
        cfg = load_config()
    except ConfigError as e:
        log.error("invalid configuration", reason=str(e))
        return 2

    host_client = HostClient()
    health = Health()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="window-rpc"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    engine_pb2_grpc.add_ContextEngineServiceServicer_to_server(WindowEngine(log, host_client, cfg["max_turns"]), server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    try:
        address, endpoint = bind(server, cfg)
    except ConfigError as e:
        log.error("cannot serve", reason=str(e))
        return 2
    server.start()
    log.info("listening", address=address, endpoint=endpoint, pid=os.getpid(), max_turns=cfg["max_turns"], registry=cfg["registry"] or None)

    stop = threading.Event()
    stopped_by = {}

    def on_signal(signum, _frame):
        stopped_by.setdefault("signal", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    registrar = None
    if cfg["registry"]:
        registrar = Registrar(
            log,
            cfg["registry"],
            ENGINE_ID,
            cfg["owner"],
            cfg["owner_token"],
            endpoint,
            PROTOCOL_VERSIONS,
            heartbeat_s=cfg["heartbeat_s"],
        )
        registrar.start()
    else:
        log.info("CONTEXTD_REGISTRY is not set: serving without registering")
    if cfg["parent_pid"]:
        threading.Thread(target=watch_parent, args=(cfg["parent_pid"], stop), name="parent-watch", daemon=True).start()

    # Wake up regularly so signal handlers run promptly in the main thread.
    while not stop.wait(0.5):
        pass

    started = time.monotonic()
    log.info("stopping", signal=stopped_by.get("signal"), grace_ms=int(cfg["grace_s"] * 1000))
    health.set_all(Health.NOT_SERVING)
    if registrar is not None:
        # First leave the registry, so contextd stops routing new calls here; then drain.
        registrar.stop(deregister=True)
    server.stop(cfg["grace_s"]).wait()
    host_client.close()
    log.info("stopped", took_ms=int((time.monotonic() - started) * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
