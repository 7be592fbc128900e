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

The methods are declared once, in contextd.client_base, for this client and for its asyncio twin
contextd.AsyncClient; this module holds only the blocking I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import Message

from contextd.channels import Metadata, TlsConfig, open_channel
from contextd.client_base import DEFAULT_ADDRESS, DEFAULT_TIMEOUT_S, ClientBase
from contextd.pages import SearchPages, TranscriptPages
from contextd.sessions import SessionLike
from contextd.v1 import search_pb2 as SR
from contextd.v1 import types_pb2

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_TIMEOUT_S", "Client"]


class Client(ClientBase):
    __doc__ = ClientBase.__doc__

    channel: grpc.Channel

    def _open(self, address: str, tls: TlsConfig | None, options: Iterable[tuple[str, Any]]) -> grpc.Channel:
        return open_channel(address, tls=tls, options=options)

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _unary(self, rpc: str, request: Message, timeout: float | None, metadata: Iterable[tuple[str, str]]) -> Any:
        call, deadline, call_metadata = self._prepare(rpc, timeout, metadata)
        try:
            return call(request, timeout=deadline, metadata=call_metadata)
        except grpc.RpcError as err:
            raise self._failed(err, rpc) from err

    # --- readiness and health ------------------------------------------------------------------

    def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the channel is connected (default: up to the client's timeout); raises
        ContextdError UNAVAILABLE when it is not by then. Calls do not need it: use it to fail
        fast at start-up on a wrong address."""
        wait = self._ready_wait(timeout)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=wait)
        except grpc.FutureTimeoutError as err:
            raise self._not_ready(wait) from err

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """grpc.health.v1 Check of `service` ("" = the server): "SERVING", "NOT_SERVING", ..."""
        return self._health_name(self._unary("Check", self._health_request(service), timeout, ()))

    # --- conveniences --------------------------------------------------------------------------

    def transcript(self, session: SessionLike, page_size: int = 1000, *, timeout: float | None = None,
                   metadata: Metadata = ()) -> Iterator[types_pb2.TranscriptEntry]:
        """Every entry of the session's transcript, in order, following page tokens to the end.
        `timeout` bounds each page's call, not the whole iteration."""
        pages = TranscriptPages(session, page_size)
        while (fields := pages.next()) is not None:
            yield from pages.take(self.get_transcript(timeout=timeout, metadata=metadata, **fields))

    def search(self, session: SessionLike, query: str, *, limit: int = 100, timeout: float | None = None,
               metadata: Metadata = (), **fields: Any) -> Iterator[SR.SearchHit]:
        """At most `limit` hits for `query` (SearchTranscript's other fields as keywords: `scope`,
        `order`), following page tokens. `timeout` bounds each page's call, not the whole iteration."""
        pages = SearchPages(session, query, limit, fields)
        while (request := pages.next()) is not None:
            yield from pages.take(self.search_transcript(timeout=timeout, metadata=metadata, **request))
