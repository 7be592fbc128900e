"""HostService, called back by an engine during one of its calls (ReadTranscript,
RewriteTranscriptEntries, DelegateCompaction, Complete)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from contextd.channels import TlsConfig, bearer, open_channel
from contextd.v1 import host_pb2, host_pb2_grpc, types_pb2

from .call_scope import CallScope
from .errors import HostCallError

__all__ = ["HostChannels", "HostClient"]

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
    channel: grpc.Channel
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
                channel = open_channel(endpoint, tls=self._tls, options=HOST_CHANNEL_OPTIONS)
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
                conn.channel.close()

    def retire(self, endpoint: str, conn: _Connection) -> None:
        with self._lock:
            if self._current.get(endpoint) is conn:
                del self._current[endpoint]
                conn.retired = True
            close = conn.retired and conn.inflight == 0
        if close:
            conn.channel.close()

    def close(self) -> None:
        with self._lock:
            conns, self._current = list(self._current.values()), {}
        for conn in conns:
            conn.channel.close()


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
        entries: list[types_pb2.TranscriptEntry] = []
        seen: set[str] = set()
        token = ""
        while True:
            fields: dict[str, Any] = {"page_size": page_size, "page_token": token, "active_only": active_only}
            if session is not None:
                fields["session"] = session
            page = self.read_transcript(timeout=timeout, **fields)
            entries.extend(page.entries)
            token = page.next_page_token
            if not token:
                return entries
            if token in seen:
                raise HostCallError(grpc.StatusCode.INTERNAL, "ReadTranscript", f"the host returned page token {token!r} twice")
            seen.add(token)

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
        scope = self._scope
        if scope.cancelled.is_set():
            code = grpc.StatusCode.DEADLINE_EXCEEDED if scope.cause == "deadline" else grpc.StatusCode.CANCELLED
            raise HostCallError(code, rpc, "not sent: the engine call already ended")
        remaining = self.deadline_for(timeout) - time.time()
        if remaining <= 0:
            expired = 0 < self.expires_at_ms <= time.time() * 1000
            why = "the HostContext has expired" if expired else "no time left before the deadline"
            raise HostCallError(grpc.StatusCode.DEADLINE_EXCEEDED, rpc, f"not sent: {why}")
        metadata = bearer(self._token) + self._trace
        with self._channels.connection(self.endpoint) as conn:
            future = getattr(conn.stub, rpc).future(request, timeout=remaining, metadata=metadata)
            # The engine call's caller gave up (deadline or cancellation): so does the host call.
            unhook = scope.on_cancel(future.cancel)
            try:
                return future.result()
            except grpc.FutureCancelledError:
                code = grpc.StatusCode.DEADLINE_EXCEEDED if scope.cause == "deadline" else grpc.StatusCode.CANCELLED
                raise HostCallError(code, rpc, "cancelled with the engine call") from None
            except grpc.RpcError as err:
                code = err.code() if callable(getattr(err, "code", None)) else grpc.StatusCode.UNKNOWN
                details = err.details() if callable(getattr(err, "details", None)) else str(err)
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    # No answer in time: the host may be busy, or the connection dead (HOST_CHANNEL_OPTIONS).
                    self._channels.retire(self.endpoint, conn)
                raise HostCallError(code, rpc, details or "failed") from err
            finally:
                unhook()
