"""HostService, called back by an engine during one of its calls (ReadTranscript,
RewriteTranscriptEntries, DelegateCompaction, Complete).

HostClient blocks (a plain `def` engine method's `ctx.host`); AsyncHostClient is the same client
whose calls are awaited on grpc.aio (an `async def` method's `ctx.host`). Everything but the call
itself — the request, the deadline, the credentials, the error — is HostClient's, for both.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from contextd.channels import TlsConfig, bearer, open_aio_channel, open_channel
from contextd.v1 import host_pb2, host_pb2_grpc, types_pb2

from .call_scope import CallScope
from .errors import HostCallError

__all__ = ["AsyncHostChannels", "AsyncHostClient", "HostChannels", "HostClient"]

Req = TypeVar("Req", bound=Message)

# Used only when neither the engine call nor the HostContext bounds a host call (a correct host
# always sets expires_at_ms).
FALLBACK_TIMEOUT_S = 60.0

# A connection of its own per host endpoint, never shared with the registration heartbeat to the same
# contextd (as the TypeScript SDK does): after a network partition, a connection that kept writing
# into the dead link resumes only when TCP's retransmission backoff next fires (up to minutes), and
# every host call on it would hang to its deadline meanwhile.
HOST_CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)


@dataclass
class _Connection:
    channel: Any  # grpc.Channel, or grpc.aio.Channel for AsyncHostChannels
    stub: host_pb2_grpc.HostServiceStub
    inflight: int = 0
    retired: bool = False


class HostChannels:
    """One channel per host endpoint, shared by every engine call; closed when the engine stops.

    A host call that runs out of time retires its channel (the connection may be stuck behind a
    partition that has since healed): the next call dials afresh, and the old channel is closed once
    the calls still under way on it have finished (closing it at once would cancel them).
    """

    def __init__(self, tls: TlsConfig | None = None) -> None:
        self._tls = tls
        self._lock = threading.Lock()
        self._current: dict[str, _Connection] = {}

    @contextmanager
    def connection(self, endpoint: str) -> Iterator[_Connection]:
        with self._lock:
            conn = self._current.get(endpoint)
            if conn is None:
                channel = self._open(endpoint)
                conn = _Connection(channel, host_pb2_grpc.HostServiceStub(channel))
                self._current[endpoint] = conn
            conn.inflight += 1
        try:
            yield conn
        finally:
            with self._lock:
                conn.inflight -= 1
                close = conn.retired and conn.inflight == 0
            if close:
                self._close(conn.channel)

    def retire(self, endpoint: str, conn: _Connection) -> None:
        with self._lock:
            if self._current.get(endpoint) is conn:
                del self._current[endpoint]
                conn.retired = True
            close = conn.retired and conn.inflight == 0
        if close:
            self._close(conn.channel)

    def close(self) -> None:
        with self._lock:
            conns, self._current = list(self._current.values()), {}
        for conn in conns:
            self._close(conn.channel)

    def _open(self, endpoint: str) -> Any:
        return open_channel(endpoint, tls=self._tls, options=HOST_CHANNEL_OPTIONS)

    def _close(self, channel: Any) -> None:
        channel.close()


class AsyncHostChannels(HostChannels):
    """HostChannels of grpc.aio channels, for the `async def` methods of an engine served on `loop`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tls: TlsConfig | None = None) -> None:
        super().__init__(tls)
        self._loop = loop
        self._closing: list[Future[None]] = []

    def _open(self, endpoint: str) -> Any:
        return open_aio_channel(endpoint, tls=self._tls, options=HOST_CHANNEL_OPTIONS)

    def _close(self, channel: Any) -> None:
        # grpc.aio closes on its loop; this may be called from the thread that stops the engine.
        self._closing.append(asyncio.run_coroutine_threadsafe(channel.close(), self._loop))

    def close(self) -> None:
        """Closes every channel; from a thread other than the loop's, waits (briefly) for it."""
        super().close()
        closing, self._closing = self._closing, []
        for done in closing:
            try:
                done.result(timeout=2.0)
            except Exception:  # a channel that will not close is not worth failing the stop for
                pass


class HostClient:
    """HostService bound to the HostContext of the engine call in progress.

    Every call sends `authorization: Bearer <HostContext.token>` and the call's trace context, has a
    deadline no later than HostContext.expires_at_ms and the engine call's own deadline (and
    `timeout`, when given), and is cancelled when the engine call is. A request is a proto or the
    keyword fields of one; `session` defaults to the engine call's session, the only one the token
    is valid for anyway. Failures raise HostCallError with the host's status, so an engine method
    that lets one propagate answers its caller with the same status.
    """

    def __init__(
        self,
        channels: HostChannels,
        host: types_pb2.HostContext,
        scope: CallScope,
        session: types_pb2.SessionRef | None = None,
        trace: tuple[tuple[str, str], ...] = (),
    ) -> None:
        #: The host's address (HostContext.endpoint).
        self.endpoint = host.endpoint
        #: When the HostContext token expires, epoch milliseconds (0: the host did not say).
        self.expires_at_ms = host.expires_at_ms
        self._token = host.token
        self._channels = channels
        self._scope = scope
        self._session = session
        self._trace = trace

    def read_transcript(self, request: host_pb2.ReadTranscriptRequest | None = None, *, timeout: float | None = None, **fields: Any) -> host_pb2.ReadTranscriptResponse:
        """One page of the transcript (`page_size`, `page_token`, `active_only`)."""
        return self._invoke("ReadTranscript", self._request(host_pb2.ReadTranscriptRequest, request, fields), timeout)

    def read_whole_transcript(
        self,
        session: types_pb2.SessionRef | None = None,
        *,
        active_only: bool = False,
        page_size: int = 1000,
        timeout: float | None = None,
    ) -> list[types_pb2.TranscriptEntry]:
        """Every entry (oldest first), following page tokens to the end. `active_only`: only the
        latest compaction entry and the entries it keeps."""
        return self._read_all(_WholeTranscript(session, active_only, page_size), timeout)

    def _read_all(self, pages: _WholeTranscript, timeout: float | None) -> list[types_pb2.TranscriptEntry]:
        while (fields := pages.next()) is not None:
            pages.take(self.read_transcript(timeout=timeout, **fields))
        return pages.entries

    def rewrite_transcript_entries(
        self, request: host_pb2.RewriteTranscriptEntriesRequest | None = None, *, timeout: float | None = None, **fields: Any
    ) -> host_pb2.RewriteTranscriptEntriesResponse:
        """Replaces the content of message entries; the host keeps the previous revision. Needs
        `transcript-rewrite` in the Engine's host_requirements."""
        return self._invoke("RewriteTranscriptEntries", self._request(host_pb2.RewriteTranscriptEntriesRequest, request, fields), timeout)

    def delegate_compaction(
        self, request: host_pb2.DelegateCompactionRequest | None = None, *, timeout: float | None = None, **fields: Any
    ) -> host_pb2.DelegateCompactionResponse:
        """Runs the host's native compaction; the host commits it under this engine's id. Needs
        `host-compaction`."""
        return self._invoke("DelegateCompaction", self._request(host_pb2.DelegateCompactionRequest, request, fields), timeout)

    def complete(self, request: host_pb2.CompleteRequest | None = None, *, timeout: float | None = None, **fields: Any) -> host_pb2.CompleteResponse:
        """An LLM completion through the host's summarizer model (FAILED_PRECONDITION when none is
        configured). Needs `llm-complete`."""
        return self._invoke("Complete", self._request(host_pb2.CompleteRequest, request, fields), timeout)

    def deadline_for(self, timeout: float | None = None) -> float:
        """The host call's deadline (epoch seconds): the earliest of the engine call's, the
        HostContext's expiry and now + `timeout`."""
        candidates = []
        if self._scope.deadline is not None:
            candidates.append(self._scope.deadline)
        if self.expires_at_ms > 0:
            candidates.append(self.expires_at_ms / 1000.0)
        if timeout is not None:
            candidates.append(time.time() + timeout)
        return min(candidates) if candidates else time.time() + FALLBACK_TIMEOUT_S

    def _request(self, kind: type[Req], request: Req | None, fields: dict[str, Any]) -> Req:
        if request is not None and fields:
            raise TypeError(f"pass a {kind.DESCRIPTOR.name} or its fields as keywords, not both")
        if request is not None:
            if not isinstance(request, kind):
                raise TypeError(f"expected a {kind.DESCRIPTOR.name}, got {type(request).__name__}")
            built = kind()
            built.CopyFrom(request)
        else:
            built = kind(**fields)
        if not built.HasField("session") and self._session is not None:
            built.session.CopyFrom(self._session)
        return built

    def _invoke(self, rpc: str, request: Message, timeout: float | None) -> Any:
        remaining, metadata = self._ready(rpc, timeout)
        with self._channels.connection(self.endpoint) as conn:
            future = getattr(conn.stub, rpc).future(request, timeout=remaining, metadata=metadata)
            # The engine call's caller gave up (deadline or cancellation): so does the host call.
            unhook = self._scope.on_cancel(future.cancel)
            try:
                return future.result()
            except grpc.FutureCancelledError:
                raise self._cancelled(rpc) from None
            except grpc.RpcError as err:
                raise self._failed(rpc, err, conn) from err
            finally:
                unhook()

    def _ready(self, rpc: str, timeout: float | None) -> tuple[float, tuple[tuple[str, str], ...]]:
        """The host call's time left and metadata; HostCallError when it must not be sent at all."""
        scope = self._scope
        if scope.cancelled.is_set():
            code = grpc.StatusCode.DEADLINE_EXCEEDED if scope.cause == "deadline" else grpc.StatusCode.CANCELLED
            raise HostCallError(code, rpc, "not sent: the engine call already ended")
        remaining = self.deadline_for(timeout) - time.time()
        if remaining <= 0:
            expired = 0 < self.expires_at_ms <= time.time() * 1000
            why = "the HostContext has expired" if expired else "no time left before the deadline"
            raise HostCallError(grpc.StatusCode.DEADLINE_EXCEEDED, rpc, f"not sent: {why}")
        return remaining, bearer(self._token) + self._trace

    def _cancelled(self, rpc: str) -> HostCallError:
        code = grpc.StatusCode.DEADLINE_EXCEEDED if self._scope.cause == "deadline" else grpc.StatusCode.CANCELLED
        return HostCallError(code, rpc, "cancelled with the engine call")

    def _failed(self, rpc: str, err: grpc.RpcError, conn: _Connection) -> HostCallError:
        code = err.code() if callable(getattr(err, "code", None)) else grpc.StatusCode.UNKNOWN
        details = err.details() if callable(getattr(err, "details", None)) else str(err)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            # No answer in time: the host may be busy, or the connection dead (HOST_CHANNEL_OPTIONS).
            self._channels.retire(self.endpoint, conn)
        return HostCallError(code, rpc, details or "failed")


class AsyncHostClient(HostClient):
    """HostClient for an `async def` engine method: `await ctx.host.read_transcript(...)`. Each
    method (read_transcript, read_whole_transcript, rewrite_transcript_entries, delegate_compaction,
    complete) returns an awaitable of what HostClient's returns. A host call awaited when the engine
    call ends is cancelled with the method's task (asyncio.CancelledError)."""

    async def _invoke(self, rpc: str, request: Message, timeout: float | None) -> Any:  # type: ignore[override]
        remaining, metadata = self._ready(rpc, timeout)
        with self._channels.connection(self.endpoint) as conn:
            try:
                return await getattr(conn.stub, rpc)(request, timeout=remaining, metadata=metadata)
            except grpc.RpcError as err:
                raise self._failed(rpc, err, conn) from err

    async def _read_all(self, pages: _WholeTranscript, timeout: float | None) -> list[types_pb2.TranscriptEntry]:  # type: ignore[override]
        while (fields := pages.next()) is not None:
            pages.take(await self.read_transcript(timeout=timeout, **fields))
        return pages.entries


class _WholeTranscript:
    """The pages of ReadTranscript to the end, without the I/O (both clients' read_whole_transcript)."""

    def __init__(self, session: types_pb2.SessionRef | None, active_only: bool, page_size: int) -> None:
        self._base: dict[str, Any] = {"page_size": page_size, "active_only": active_only}
        if session is not None:
            self._base["session"] = session
        self.entries: list[types_pb2.TranscriptEntry] = []
        self._seen: set[str] = set()
        self._token: str | None = ""

    def next(self) -> dict[str, Any] | None:
        return None if self._token is None else {**self._base, "page_token": self._token}

    def take(self, page: host_pb2.ReadTranscriptResponse) -> None:
        self.entries.extend(page.entries)
        token = page.next_page_token
        if token and token in self._seen:
            raise HostCallError(grpc.StatusCode.INTERNAL, "ReadTranscript", f"the host returned page token {token!r} twice")
        self._seen.add(token)
        self._token = token or None
