"""The one path of every outgoing gRPC call the Python package makes.

The runtime clients (contextd.Client, contextd.AsyncClient) and the engine SDK (contextd.engine:
registration, HostService callbacks) all dial through `open_channel` (or `open_aio_channel`, its
asyncio twin), so they share one set of channel options, one way to
configure TLS and one spelling of the bearer credential — the same as the TypeScript side
(src/contract/client-call.ts, src/contract/metadata.ts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

__all__ = ["CHANNEL_OPTIONS", "Metadata", "TlsConfig", "bearer", "open_aio_channel", "open_channel"]

#: gRPC metadata as grpcio takes it: (key, value) pairs.
Metadata = tuple[tuple[str, str], ...]

CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    # contextd accepts imports and appends up to its own limits (tens of MiB); grpcio's default
    # 4 MiB receive limit would refuse a large transcript page or export before contextd does.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Reconnect within seconds when the peer (re)starts, instead of backing off for up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
)

# What contextd reads as a bearer token (`Bearer[ \t]+(\S+)`) and gRPC metadata can carry: printable
# ASCII without spaces. Anything else (the newline of a token file, a space) would be refused by
# grpcio with a message that does not say which value was wrong, or not match on the server.
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class TlsConfig:
    """TLS for a channel. All fields are optional: `TlsConfig()` trusts the system's roots.

    ca_file: PEM bundle of the certificate authorities to trust (a private CA).
    cert_file, key_file: this client's certificate and key, for servers that require client
        certificates (mTLS, `tls.require_client_cert` in contextd's config). Both or neither.
    server_name_override: the name to verify the server's certificate against, when it differs from
        the host in the address (e.g. dialing an IP whose certificate names only a DNS name).
    """

    ca_file: str | Path | None = None
    cert_file: str | Path | None = None
    key_file: str | Path | None = None
    server_name_override: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("TlsConfig: cert_file and key_file go together (a client certificate needs its key)")

    def credentials(self) -> grpc.ChannelCredentials:
        """The grpcio channel credentials; reads the files now, so a missing file fails here, not on a call."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "ca_file"),
            private_key=_read(self.key_file, "key_file"),
            certificate_chain=_read(self.cert_file, "cert_file"),
        )

    def channel_options(self) -> tuple[tuple[str, Any], ...]:
        if self.server_name_override:
            return (("grpc.ssl_target_name_override", self.server_name_override),)
        return ()


def _read(file: str | Path | None, field: str) -> bytes | None:
    if file is None:
        return None
    try:
        return Path(file).read_bytes()
    except OSError as err:
        raise ValueError(f"TlsConfig.{field}: cannot read {file}: {err.strerror or err}") from err


def open_channel(
    address: str,
    *,
    tls: TlsConfig | None = None,
    options: Iterable[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A channel to `address` ("host:port" or "unix:/path"): plaintext without `tls`.

    `options` are added to CHANNEL_OPTIONS; an option given in both takes the caller's value.
    """
    credentials, channel_options = _settings(address, tls, options)
    if credentials is None:
        return grpc.insecure_channel(address, options=channel_options)
    return grpc.secure_channel(address, credentials, options=channel_options)


def open_aio_channel(
    address: str,
    *,
    tls: TlsConfig | None = None,
    options: Iterable[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """`open_channel` for asyncio (grpc.aio): the same options and credentials. Create it inside the
    event loop that will use it (grpc.aio binds a channel to the loop it was created in)."""
    credentials, channel_options = _settings(address, tls, options)
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=channel_options)
    return grpc.aio.secure_channel(address, credentials, options=channel_options)


def _settings(
    address: str, tls: TlsConfig | None, options: Iterable[tuple[str, Any]]
) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    """What both kinds of channel are opened with: credentials (None: plaintext) and options."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("address is required (host:port or unix:/path)")
    merged: dict[str, Any] = dict(CHANNEL_OPTIONS)
    if tls is not None:
        merged.update(tls.channel_options())
    merged.update(options)
    return (tls.credentials() if tls is not None else None), list(merged.items())


def bearer(token: str | None) -> Metadata:
    """`authorization: Bearer <token>` metadata, or none when there is no token.

    Raises ValueError (without echoing the token) when it is not a valid bearer token, e.g. it still
    has the newline of the file it was read from.
    """
    if token is None or token == "":
        return ()
    if not isinstance(token, str) or not _TOKEN_RE.fullmatch(token):
        raise ValueError("token is not a valid bearer token (printable ASCII without spaces or newlines)")
    return (("authorization", f"Bearer {token}"),)
