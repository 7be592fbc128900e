"""How serve_engine serves and registers: keyword options, defaulting from the SDK environment
variables (docs/engines.md, "Write your own engine") so the same engine runs under contextd's
managed sidecars, docker-compose or by hand — the same variables as the TypeScript SDK."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import grpc

from contextd.channels import TlsConfig, bearer

from .errors import ServeOptionsError
from .listen import parse_listen
from .logs import parse_level

__all__ = ["ServeOptions", "resolve_options"]


@dataclass(frozen=True)
class ServeOptions:
    #: contextd's address (host:port or unix:/path). Env CONTEXTD_REGISTRY. None or "": serve only.
    registry: str | None = None
    #: The owner the engine id is registered for. Env CONTEXTD_OWNER. Required to register.
    owner: str = ""
    #: Proves the owner: sent as `authorization: Bearer <token>`. Env CONTEXTD_OWNER_TOKEN.
    owner_token: str | None = None
    #: host:port, [v6]:port or unix:/path. Env CONTEXTD_ENGINE_LISTEN; default 127.0.0.1:0 (port 0
    #: picks a free port, and the real one is registered).
    listen: str = "127.0.0.1:0"
    #: The endpoint to register when the registry must dial another address (a container or
    #: service name). Env CONTEXTD_ENGINE_ADVERTISE.
    advertise: str | None = None
    #: Which instance of the engine this process is, when several serve one engine id: stable
    #: across restarts (a pod name). Env CONTEXTD_ENGINE_INSTANCE_ID; default: its endpoint.
    instance_id: str | None = None
    #: Where it runs, so each contextd replica calls the instance beside it first. Env
    #: CONTEXTD_ENGINE_NODE, CONTEXTD_ENGINE_ZONE, CONTEXTD_ENGINE_REPLICA.
    node: str | None = None
    zone: str | None = None
    replica: str | None = None
    #: Replace this owner's existing registration of this instance (a restarted engine).
    allow_same_owner_refresh: bool = True
    #: Seconds between checks that the registry still has the engine (it registers again if not).
    heartbeat: float = 2.0
    #: Backoff while the registry is unreachable: from retry_initial doubling up to retry_max seconds.
    retry_initial: float = 0.2
    retry_max: float = 5.0
    #: Serve until SIGTERM/SIGINT, then stop and return (True), or return the running engine at once.
    block: bool = True
    #: SIGTERM/SIGINT: deregister, NOT_SERVING, drain, exit 0. Only from the main thread.
    handle_signals: bool = True
    #: How long in-flight calls may finish on stop before they are cancelled (seconds).
    drain_timeout: float = 5.0
    #: debug | info | warn | error | silent. Env CONTEXTD_LOG_LEVEL; default info.
    log_level: str = "info"
    #: Log through this logger instead of JSON lines on stderr.
    logger: logging.Logger | None = None
    #: TLS for the calls to the registry and to the host. Default plaintext.
    tls: TlsConfig | None = None
    #: TLS (or mTLS) for the engine's own port. Default plaintext.
    server_credentials: grpc.ServerCredentials | None = None
    #: Largest request/response the engine accepts or sends.
    max_message_bytes: int = 64 * 1024 * 1024
    #: Engine calls served at once (threads).
    max_workers: int = 32
    #: Runs once, after the server drained on stop (close databases, flush files).
    on_shutdown: Callable[[], None] | None = None
    #: Stop when this process is gone. Env CONTEXTD_PARENT_PID (contextd sets it for managed sidecars).
    parent_pid: int | None = None
    #: A failed start prints one line and exits 2 (True), or raises EngineStartError. Default: `block`.
    exit_on_error: bool | None = None
    #: Where the environment variables are read from. Default os.environ.
    env: Mapping[str, str] | None = None


OPTION_NAMES = tuple(f.name for f in fields(ServeOptions))


def _fail(problem: str) -> ServeOptionsError:
    return ServeOptionsError(problem)


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(f"{name} must be a string (got {type(value).__name__} {value!r})")
    return value.strip() or None


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise _fail(f"`{name}` must be a positive number of seconds (got {value!r})")
    return float(value)


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise _fail(f"{name} must be an integer, got {raw!r}") from None


def resolve_options(given: Mapping[str, Any]) -> ServeOptions:
    """serve_engine's keyword options, checked and completed from the environment."""
    unknown = [k for k in given if k not in OPTION_NAMES]
    if unknown:
        hint = difflib.get_close_matches(unknown[0], OPTION_NAMES, n=1)
        raise _fail(f"unknown option `{unknown[0]}`" + (f": did you mean `{hint[0]}`?" if hint else ""))
    env = given.get("env")
    env = os.environ if env is None else env

    def pick(name: str, var: str) -> str | None:
        return _text(given[name], f"`{name}`") if name in given else _text(env.get(var), var)

    # An explicit registry="" disables registration even when CONTEXTD_REGISTRY is set.
    registry = pick("registry", "CONTEXTD_REGISTRY")
    owner = pick("owner", "CONTEXTD_OWNER") or ""
    if registry and not owner:
        raise _fail(
            f"registering with {registry} needs an owner: set `owner` or CONTEXTD_OWNER (and usually `owner_token` / CONTEXTD_OWNER_TOKEN)"
        )
    owner_token = pick("owner_token", "CONTEXTD_OWNER_TOKEN")
    try:
        bearer(owner_token)
    except ValueError as err:
        raise _fail(f"the owner token (CONTEXTD_OWNER_TOKEN): {err}") from None
    listen = pick("listen", "CONTEXTD_ENGINE_LISTEN") or "127.0.0.1:0"
    parse_listen(listen)
    level = pick("log_level", "CONTEXTD_LOG_LEVEL") or "info"
    if parse_level(level) is None:
        raise _fail(f"log level {level!r} is not one of debug, info, warn, error, silent")
    parent_pid = given.get("parent_pid") if "parent_pid" in given else _env_int(env, "CONTEXTD_PARENT_PID")
    if parent_pid is not None and (not isinstance(parent_pid, int) or parent_pid < 0):
        raise _fail(f"`parent_pid` must be a process id (got {parent_pid!r})")
    values: dict[str, Any] = dict(given)
    values.update(
        registry=registry,
        owner=owner,
        owner_token=owner_token,
        listen=listen,
        advertise=pick("advertise", "CONTEXTD_ENGINE_ADVERTISE"),
        instance_id=pick("instance_id", "CONTEXTD_ENGINE_INSTANCE_ID"),
        node=pick("node", "CONTEXTD_ENGINE_NODE"),
        zone=pick("zone", "CONTEXTD_ENGINE_ZONE"),
        replica=pick("replica", "CONTEXTD_ENGINE_REPLICA"),
        log_level=level,
        parent_pid=parent_pid or None,
        env=env,
    )
    defaults = ServeOptions()
    for name in ("heartbeat", "retry_initial", "retry_max", "drain_timeout"):
        values[name] = _seconds(name, values.get(name, getattr(defaults, name)))
    values["retry_max"] = max(values["retry_initial"], values["retry_max"])
    for name in ("max_message_bytes", "max_workers"):
        value = values.get(name, getattr(defaults, name))
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise _fail(f"`{name}` must be a positive integer (got {value!r})")
    for name in ("allow_same_owner_refresh", "block", "handle_signals"):
        if not isinstance(values.get(name, True), bool):
            raise _fail(f"`{name}` must be True or False (got {values[name]!r})")
    if values.get("tls") is not None and not isinstance(values["tls"], TlsConfig):
        raise _fail("`tls` must be a contextd.channels.TlsConfig")
    if values.get("on_shutdown") is not None and not callable(values["on_shutdown"]):
        raise _fail("`on_shutdown` must be a function")
    return ServeOptions(**values)
