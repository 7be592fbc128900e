"""contextd.Client: SessionService, what an agent runtime written in Python calls.

    from contextd import Client, Mode, messages as m

    with Client("127.0.0.1:50051", token=os.environ.get("CONTEXTD_RUNTIME_TOKEN")) as cx:
        cx.append_messages(session="chat-42", messages=[m.user("Fix the failing test")])
        ctx = cx.assemble(session="chat-42", token_budget=32_000)
        print(ctx.engine_id, Mode.Name(ctx.mode), ctx.estimated_tokens)

Every call has a deadline (the client's `timeout`, 30 s unless told otherwise, or the call's own
`timeout=`): a call without one waits forever on a peer that accepted the connection and then
stopped answering. Failures raise ContextdError naming the RPC, with the server's status code and
message. The client is safe to share between threads (grpcio channels are).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Callable, TypeVar

import grpc
from google.protobuf.message import Message

from contextd.channels import Metadata, TlsConfig, bearer, open_channel
from contextd.errors import ContextdError
from contextd.health.v1 import health_pb2, health_pb2_grpc
from contextd.request_fields import build_request
from contextd.sessions import SessionLike, session_ref
from contextd.v1 import search_pb2 as SR
from contextd.v1 import session_pb2 as S
from contextd.v1 import session_pb2_grpc, types_pb2

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_TIMEOUT_S", "Client"]

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 30.0

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Message)


def _check_timeout(timeout: float | None, what: str) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


class Client:
    """A SessionService client.

    address: "host:port" or "unix:/path" (default 127.0.0.1:50051).
    token: the runtime token, sent as `authorization: Bearer <token>` (None: no credentials, for a
        contextd with `auth.required: false`).
    tls: TlsConfig for a contextd serving TLS (None: plaintext).
    timeout: the deadline of every call, in seconds, unless the call gives its own `timeout=`.
        None: no deadline.
    options: extra grpcio channel options, over contextd.channels.CHANNEL_OPTIONS.

    Each method takes the request proto, or its fields as keywords; `session=` (and `parent=`,
    `child=`) also take a session id, a (session_id, agent_id) tuple or a dict. Keyword-only
    `timeout=` and `metadata=` (extra (key, value) pairs) apply to that call alone.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        options: Iterable[tuple[str, Any]] = (),
    ) -> None:
        self._timeout = _check_timeout(timeout, "timeout")
        self._auth: Metadata = bearer(token)
        self.address = address
        self.channel: grpc.Channel = open_channel(address, tls=tls, options=options)
        #: The generated stub, for anything this class does not wrap.
        self.stub = session_pb2_grpc.SessionServiceStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    @property
    def timeout(self) -> float | None:
        """The default deadline of a call, in seconds (None: none)."""
        return self._timeout

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.address!r}, timeout={self._timeout!r})"

    # --- the call path -------------------------------------------------------------------------

    def _unary(self, rpc: str, request: Message, timeout: float | None, metadata: Iterable[tuple[str, str]]) -> Any:
        call: Callable[..., Any] = getattr(self.stub, rpc) if rpc != "Check" else self._health.Check
        deadline = _check_timeout(timeout, f"{rpc}: timeout") if timeout is not None else self._timeout
        log.debug("contextd %s (deadline %s s)", rpc, deadline)
        try:
            return call(request, timeout=deadline, metadata=self._auth + tuple(metadata))
        except grpc.RpcError as err:
            raise ContextdError.from_rpc_error(err, rpc) from err

    def _call(
        self,
        rpc: str,
        request_type: type[R],
        request: R | None,
        fields: Mapping[str, Any],
        timeout: float | None,
        metadata: Iterable[tuple[str, str]],
    ) -> Any:
        return self._unary(rpc, build_request(request_type, request, fields, _snake(rpc)), timeout, metadata)

    # --- readiness and health ------------------------------------------------------------------

    def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the channel is connected (default: up to the client's timeout); raises
        ContextdError UNAVAILABLE when it is not by then. Calls do not need it: use it to fail
        fast at start-up on a wrong address."""
        wait = _check_timeout(timeout, "timeout") if timeout is not None else self._timeout
        try:
            grpc.channel_ready_future(self.channel).result(timeout=wait)
        except grpc.FutureTimeoutError as err:
            raise ContextdError(grpc.StatusCode.UNAVAILABLE, f"not connected to {self.address} after {wait} s") from err

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """grpc.health.v1 Check of `service` ("" = the server): "SERVING", "NOT_SERVING", ..."""
        answer = self._unary("Check", health_pb2.HealthCheckRequest(service=service), timeout, ())
        return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)

    # --- SessionService, one method per RPC -------------------------------------------------------

    def append_messages(self, request: S.AppendMessagesRequest | None = None, /, *, timeout: float | None = None,
                        metadata: Metadata = (), **fields: Any) -> S.AppendMessagesResponse:
        """Stores messages (all or none). With `idempotency_key=`, a retry writes nothing and answers `replayed`;
        with `message_keys=` (one per message), a message whose key the session already holds is not stored
        again (its index is in `held_indexes`)."""
        return self._call("AppendMessages", S.AppendMessagesRequest, request, fields, timeout, metadata)

    def assemble(self, request: S.AssembleRequest | None = None, /, *, timeout: float | None = None,
                 metadata: Metadata = (), **fields: Any) -> S.AssembleResponse:
        """The context for the next model call, within `token_budget`."""
        return self._call("Assemble", S.AssembleRequest, request, fields, timeout, metadata)

    def compact(self, request: S.CompactRequest | None = None, /, *, timeout: float | None = None,
                metadata: Metadata = (), **fields: Any) -> S.CompactResponse:
        return self._call("Compact", S.CompactRequest, request, fields, timeout, metadata)

    def after_turn(self, request: S.AfterTurnRequest | None = None, /, *, timeout: float | None = None,
                   metadata: Metadata = (), **fields: Any) -> S.AfterTurnResponse:
        return self._call("AfterTurn", S.AfterTurnRequest, request, fields, timeout, metadata)

    def maintain(self, request: S.MaintainRequest | None = None, /, *, timeout: float | None = None,
                 metadata: Metadata = (), **fields: Any) -> S.MaintainResponse:
        return self._call("Maintain", S.MaintainRequest, request, fields, timeout, metadata)

    def prepare_subagent_spawn(self, request: S.PrepareSubagentSpawnRequest | None = None, /, *,
                               timeout: float | None = None, metadata: Metadata = (),
                               **fields: Any) -> S.PrepareSubagentSpawnResponse:
        return self._call("PrepareSubagentSpawn", S.PrepareSubagentSpawnRequest, request, fields, timeout, metadata)

    def rollback_subagent_spawn(self, request: S.RollbackSubagentSpawnRequest | None = None, /, *,
                                timeout: float | None = None, metadata: Metadata = (),
                                **fields: Any) -> S.RollbackSubagentSpawnResponse:
        return self._call("RollbackSubagentSpawn", S.RollbackSubagentSpawnRequest, request, fields, timeout, metadata)

    def end_subagent(self, request: S.EndSubagentRequest | None = None, /, *, timeout: float | None = None,
                     metadata: Metadata = (), **fields: Any) -> S.EndSubagentResponse:
        return self._call("EndSubagent", S.EndSubagentRequest, request, fields, timeout, metadata)

    def get_session(self, request: S.GetSessionRequest | None = None, /, *, timeout: float | None = None,
                    metadata: Metadata = (), **fields: Any) -> S.GetSessionResponse:
        return self._call("GetSession", S.GetSessionRequest, request, fields, timeout, metadata)

    def list_sessions(self, request: S.ListSessionsRequest | None = None, /, *, timeout: float | None = None,
                      metadata: Metadata = (), **fields: Any) -> S.ListSessionsResponse:
        return self._call("ListSessions", S.ListSessionsRequest, request, fields, timeout, metadata)

    def get_transcript(self, request: S.GetTranscriptRequest | None = None, /, *, timeout: float | None = None,
                       metadata: Metadata = (), **fields: Any) -> S.GetTranscriptResponse:
        """One page of the transcript; `transcript()` follows the pages for you."""
        return self._call("GetTranscript", S.GetTranscriptRequest, request, fields, timeout, metadata)

    def import_transcript(self, request: S.ImportTranscriptRequest | None = None, /, *, timeout: float | None = None,
                          metadata: Metadata = (), **fields: Any) -> S.ImportTranscriptResponse:
        return self._call("ImportTranscript", S.ImportTranscriptRequest, request, fields, timeout, metadata)

    def export_transcript(self, request: S.ExportTranscriptRequest | None = None, /, *, timeout: float | None = None,
                          metadata: Metadata = (), **fields: Any) -> S.ExportTranscriptResponse:
        return self._call("ExportTranscript", S.ExportTranscriptRequest, request, fields, timeout, metadata)

    def delete_session(self, request: S.DeleteSessionRequest | None = None, /, *, timeout: float | None = None,
                       metadata: Metadata = (), **fields: Any) -> S.DeleteSessionResponse:
        return self._call("DeleteSession", S.DeleteSessionRequest, request, fields, timeout, metadata)

    def search_transcript(self, request: SR.SearchTranscriptRequest | None = None, /, *, timeout: float | None = None,
                          metadata: Metadata = (), **fields: Any) -> SR.SearchTranscriptResponse:
        """One page of hits for `query` in the session's whole history (compacted and hidden entries too),
        or in every session of its agent with `scope=SearchScope.SEARCH_SCOPE_AGENT`; newest first unless
        `order=SearchOrder.SEARCH_ORDER_RELEVANCE`. Each snippet marks its matches «like this». `search()`
        follows the pages for you."""
        return self._call("SearchTranscript", SR.SearchTranscriptRequest, request, fields, timeout, metadata)

    def expand_compaction(self, request: SR.ExpandCompactionRequest | None = None, /, *, timeout: float | None = None,
                          metadata: Metadata = (), **fields: Any) -> SR.ExpandCompactionResponse:
        """One page of the original entries a compaction summary (`compaction_entry_id`) covers."""
        return self._call("ExpandCompaction", SR.ExpandCompactionRequest, request, fields, timeout, metadata)

    # --- conveniences --------------------------------------------------------------------------

    def transcript(self, session: SessionLike, page_size: int = 1000, *, timeout: float | None = None,
                   metadata: Metadata = ()) -> Iterator[types_pb2.TranscriptEntry]:
        """Every entry of the session's transcript, in order, following page tokens to the end.
        `timeout` bounds each page's call, not the whole iteration."""
        ref = session_ref(session)
        page_token = ""
        while True:
            page = self.get_transcript(session=ref, page_size=page_size, page_token=page_token,
                                       timeout=timeout, metadata=metadata)
            yield from page.entries
            if not page.next_page_token:
                return
            page_token = page.next_page_token

    def search(self, session: SessionLike, query: str, *, limit: int = 100, timeout: float | None = None,
               metadata: Metadata = (), **fields: Any) -> Iterator[SR.SearchHit]:
        """At most `limit` hits for `query` (SearchTranscript's other fields as keywords: `scope`,
        `order`), following page tokens. `timeout` bounds each page's call, not the whole iteration."""
        ref = session_ref(session)
        page_token, left = "", limit
        while left > 0:
            page = self.search_transcript(session=ref, query=query, page_size=min(left, 100), page_token=page_token,
                                          timeout=timeout, metadata=metadata, **fields)
            hits = list(page.hits)[:left]
            yield from hits
            left -= len(hits)
            if not page.next_page_token:
                return
            page_token = page.next_page_token


def _snake(rpc: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(rpc))
