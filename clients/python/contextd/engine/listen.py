"""Where an engine listens: host:port, [v6]:port or unix:/path, and the endpoint it registers."""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from .errors import EngineStartError, ServeOptionsError

if TYPE_CHECKING:
    from .logs import EngineLogger

__all__ = ["ListenAddress", "bind", "format_host_port", "parse_listen", "registrable_host", "unix_path"]


@dataclass(frozen=True)
class ListenAddress:
    kind: str  # "tcp" | "unix"
    target: str  # as given to grpc (unix:/path or host:port)
    host: str = ""
    port: int = 0


def parse_listen(text: str) -> ListenAddress:
    """host:port, [v6]:port or unix:/path (an empty host listens on every interface)."""
    if text.startswith("unix:"):
        if len(text) <= len("unix:"):
            raise ServeOptionsError(f"listen address {text!r} has no socket path")
        return ListenAddress("unix", text)
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
        if ":" in host:
            sep = ""
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ServeOptionsError(f"listen address {text!r} is not host:port, [ipv6]:port or unix:/path")
    host = host or "0.0.0.0"
    return ListenAddress("tcp", format_host_port(host, int(port)), host, int(port))


def unix_path(target: str) -> str:
    """The socket path of a unix: target (unix:/abs, unix:///abs or unix:relative)."""
    rest = target[len("unix:") :]
    return rest[2:] if rest.startswith("//") else rest


def format_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def registrable_host(host: str) -> tuple[str, bool]:
    """The host to register for a bind address, and whether it was a wildcard (then loopback)."""
    loopback = _WILDCARDS.get(host)
    return (loopback, True) if loopback else (host, False)


def bind(
    server: grpc.Server,
    listen_text: str,
    *,
    advertise: str | None,
    registering: bool,
    server_credentials: grpc.ServerCredentials | None,
    log: EngineLogger,
) -> tuple[str, str]:
    """Binds `server` to `listen_text` (port 0 picks one); returns the real address and the endpoint to register."""
    listen = parse_listen(listen_text)
    if listen.kind == "unix":
        _remove_stale_socket(unix_path(listen.target))
    try:
        if server_credentials is not None:
            port = server.add_secure_port(listen.target, server_credentials)
        else:
            port = server.add_insecure_port(listen.target)
    except RuntimeError as err:  # grpcio >= 1.5x raises instead of returning 0
        raise EngineStartError(f"cannot listen on {listen_text}: {err}") from None
    if port == 0:
        raise EngineStartError(f"cannot listen on {listen_text} (address in use or not permitted)")
    if listen.kind == "unix":
        return listen.target, advertise or listen.target
    address = format_host_port(listen.host, port)
    if advertise:
        return address, advertise
    host, wildcard = registrable_host(listen.host)
    if wildcard and registering:
        log.warning(
            f"listening on a wildcard address: registering {host}; set `advertise` (CONTEXTD_ENGINE_ADVERTISE) if the registry runs elsewhere",
            extra={"listen": listen_text},
        )
    return address, format_host_port(host, port)


def _remove_stale_socket(path: str) -> None:
    """A socket file left by a run that crashed makes bind fail: remove it when nothing answers on it."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
    except OSError:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
            return  # alive: let bind report the conflict
        except OSError:
            pass
    try:
        os.unlink(path)
    except OSError:
        pass
