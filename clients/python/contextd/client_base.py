"""What contextd.Client and contextd.AsyncClient share: everything but the I/O.

The two clients have one surface — the same methods, names, arguments and answers — because that
surface is declared once, here: each SessionService RPC is a `SessionRpc` on `ClientBase`, which
builds the request (contextd.request_fields), picks the deadline and the metadata, and hands the
call to the subclass's `_unary`, the one method that does I/O. `Client._unary` blocks on grpcio;
`AsyncClient._unary` awaits grpc.aio. A SessionRpc read from an AsyncClient is a real `async def`
(inspect.iscoroutinefunction holds), so asyncio frameworks that look for one find it.

Errors are translated in one place (ContextdError.from_rpc_error, which reads grpc.aio's errors as it
reads grpcio's), and paging in another (contextd.pages). Neither client retries a call that reached
contextd: an append is made safe to repeat by its idempotency key, and deciding to repeat it is the
caller's. Both get gRPC's transparent retry of a call that never left the client (the channel
options of contextd.channels are the same for both).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Iterable, Mapping
from types import MethodType
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar, overload

import grpc
from google.protobuf.message import Message

from contextd.channels import Metadata, TlsConfig, bearer
from contextd.errors import ContextdError
from contextd.health.v1 import health_pb2, health_pb2_grpc
from contextd.request_fields import build_request
from contextd.v1 import search_pb2 as SR
from contextd.v1 import session_pb2 as S
from contextd.v1 import session_pb2_grpc

if TYPE_CHECKING:
    from contextd.async_client import AsyncClient
    from contextd.client import Client

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_TIMEOUT_S", "ClientBase", "SessionRpc"]

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 30.0

log = logging.getLogger("contextd.client")

Req = TypeVar("Req", bound=Message)
Res = TypeVar("Res", bound=Message)
Req_contra = TypeVar("Req_contra", bound=Message, contravariant=True)
Res_co = TypeVar("Res_co", bound=Message, covariant=True)


def check_timeout(timeout: float | None, what: str) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def snake(rpc: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(rpc))


class UnaryCall(Protocol[Req_contra, Res_co]):
    def __call__(self, request: Req_contra | None = None, /, *, timeout: float | None = None,
                 metadata: Metadata = (), **fields: Any) -> Res_co: ...


class AsyncUnaryCall(Protocol[Req_contra, Res_co]):
    def __call__(self, request: Req_contra | None = None, /, *, timeout: float | None = None,
                 metadata: Metadata = (), **fields: Any) -> Awaitable[Res_co]: ...


class SessionRpc(Generic[Req, Res]):
    """One SessionService RPC as a client method: `cx.assemble(request)` or `cx.assemble(**fields)`,
    with keyword-only `timeout=` and `metadata=`. On a Client it returns the response; on an
    AsyncClient it is an `async def` returning it."""

    def __init__(self, rpc: str, request: type[Req], response: type[Res], doc: str = "") -> None:
        self.rpc, self.request, self.response = rpc, request, response
        self.name = snake(rpc)
        self.__doc__ = doc or f"SessionService.{rpc}."
        name, spec = self.name, self

        def call(client: ClientBase, request: Req | None = None, /, *, timeout: float | None = None,
                 metadata: Metadata = (), **fields: Any) -> Any:
            return client._unary(rpc, build_request(spec.request, request, fields, name), timeout, metadata)

        async def call_async(client: ClientBase, request: Req | None = None, /, *, timeout: float | None = None,
                             metadata: Metadata = (), **fields: Any) -> Any:
            return await client._unary(rpc, build_request(spec.request, request, fields, name), timeout, metadata)

        for fn in (call, call_async):
            fn.__name__, fn.__qualname__, fn.__doc__ = name, name, self.__doc__
        self._sync: Callable[..., Any] = call
        self._async: Callable[..., Any] = call_async

    @overload
    def __get__(self, client: None, owner: type) -> Callable[..., Any]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type) -> AsyncUnaryCall[Req, Res]: ...
    @overload
    def __get__(self, client: Client, owner: type) -> UnaryCall[Req, Res]: ...
    def __get__(self, client: ClientBase | None, owner: type[ClientBase]) -> Any:
        fn = self._async if owner.asynchronous else self._sync
        return fn if client is None else MethodType(fn, client)


class ClientBase:
    """A SessionService client without its I/O: construction, deadlines, credentials, the RPCs.

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

    #: True for a client whose methods are coroutines (AsyncClient).
    asynchronous = False

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        options: Iterable[tuple[str, Any]] = (),
    ) -> None:
        self._timeout = check_timeout(timeout, "timeout")
        self._auth: Metadata = bearer(token)
        self.address = address
        self.channel = self._open(address, tls, options)
        #: The generated stub, for anything this class does not wrap (its calls are grpc.aio's on an AsyncClient).
        self.stub = session_pb2_grpc.SessionServiceStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    def _open(self, address: str, tls: TlsConfig | None, options: Iterable[tuple[str, Any]]) -> Any:
        raise NotImplementedError

    def _unary(self, rpc: str, request: Message, timeout: float | None, metadata: Iterable[tuple[str, str]]) -> Any:
        raise NotImplementedError

    @property
    def timeout(self) -> float | None:
        """The default deadline of a call, in seconds (None: none)."""
        return self._timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, timeout={self._timeout!r})"

    # --- what every call does before it goes out ---------------------------------------------------

    def _prepare(self, rpc: str, timeout: float | None, metadata: Iterable[tuple[str, str]]) -> tuple[Callable[..., Any], float | None, Metadata]:
        """The stub method, deadline and metadata of one call."""
        call: Callable[..., Any] = getattr(self.stub, rpc) if rpc != "Check" else self._health.Check
        deadline = check_timeout(timeout, f"{rpc}: timeout") if timeout is not None else self._timeout
        log.debug("contextd %s (deadline %s s)", rpc, deadline)
        return call, deadline, self._auth + tuple(metadata)

    @staticmethod
    def _failed(err: grpc.RpcError, rpc: str) -> ContextdError:
        return ContextdError.from_rpc_error(err, rpc)

    def _ready_wait(self, timeout: float | None) -> float | None:
        return check_timeout(timeout, "timeout") if timeout is not None else self._timeout

    def _not_ready(self, wait: float | None) -> ContextdError:
        return ContextdError(grpc.StatusCode.UNAVAILABLE, f"not connected to {self.address} after {wait} s")

    @staticmethod
    def _health_request(service: str) -> health_pb2.HealthCheckRequest:
        return health_pb2.HealthCheckRequest(service=service)

    @staticmethod
    def _health_name(answer: health_pb2.HealthCheckResponse) -> str:
        return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)

    # --- SessionService, one method per RPC -------------------------------------------------------

    append_messages = SessionRpc(
        "AppendMessages", S.AppendMessagesRequest, S.AppendMessagesResponse,
        """Stores messages (all or none). With `idempotency_key=`, a retry writes nothing and answers `replayed`;
        with `message_keys=` (one per message), a message whose key the session already holds is not stored
        again (its index is in `held_indexes`).""",
    )
    assemble = SessionRpc("Assemble", S.AssembleRequest, S.AssembleResponse, "The context for the next model call, within `token_budget`.")
    compact = SessionRpc("Compact", S.CompactRequest, S.CompactResponse)
    after_turn = SessionRpc("AfterTurn", S.AfterTurnRequest, S.AfterTurnResponse)
    maintain = SessionRpc("Maintain", S.MaintainRequest, S.MaintainResponse)
    prepare_subagent_spawn = SessionRpc("PrepareSubagentSpawn", S.PrepareSubagentSpawnRequest, S.PrepareSubagentSpawnResponse)
    rollback_subagent_spawn = SessionRpc("RollbackSubagentSpawn", S.RollbackSubagentSpawnRequest, S.RollbackSubagentSpawnResponse)
    end_subagent = SessionRpc("EndSubagent", S.EndSubagentRequest, S.EndSubagentResponse)
    get_session = SessionRpc("GetSession", S.GetSessionRequest, S.GetSessionResponse)
    list_sessions = SessionRpc("ListSessions", S.ListSessionsRequest, S.ListSessionsResponse)
    get_transcript = SessionRpc(
        "GetTranscript", S.GetTranscriptRequest, S.GetTranscriptResponse,
        "One page of the transcript; `transcript()` follows the pages for you.",
    )
    import_transcript = SessionRpc("ImportTranscript", S.ImportTranscriptRequest, S.ImportTranscriptResponse)
    export_transcript = SessionRpc("ExportTranscript", S.ExportTranscriptRequest, S.ExportTranscriptResponse)
    delete_session = SessionRpc("DeleteSession", S.DeleteSessionRequest, S.DeleteSessionResponse)
    search_transcript = SessionRpc(
        "SearchTranscript", SR.SearchTranscriptRequest, SR.SearchTranscriptResponse,
        """One page of hits for `query` in the session's whole history (compacted and hidden entries too),
        or in every session of its agent with `scope=SearchScope.SEARCH_SCOPE_AGENT`; newest first unless
        `order=SearchOrder.SEARCH_ORDER_RELEVANCE`. Each snippet marks its matches «like this». `search()`
        follows the pages for you.""",
    )
    expand_compaction = SessionRpc(
        "ExpandCompaction", SR.ExpandCompactionRequest, SR.ExpandCompactionResponse,
        "One page of the original entries a compaction summary (`compaction_entry_id`) covers.",
    )


#: Every RPC a client wraps, by method name (for tests and introspection).
SESSION_RPCS: Mapping[str, SessionRpc[Any, Any]] = {
    name: value for name, value in vars(ClientBase).items() if isinstance(value, SessionRpc)
}
