"""contextd.AsyncClient: contextd.Client for asyncio runtimes, on grpc.aio.

    from contextd import AsyncClient, Mode, messages as m

    async with AsyncClient("127.0.0.1:50051", token=os.environ.get("CONTEXTD_RUNTIME_TOKEN")) as cx:
        await cx.append_messages(session="chat-42", messages=[m.user("Fix the failing test")])
        ctx = await cx.assemble(session="chat-42", token_budget=32_000)
        print(ctx.engine_id, Mode.Name(ctx.mode), ctx.estimated_tokens)

The same surface as Client — every method, name and argument, the same answers, deadlines,
credentials, TLS and ContextdError — declared once in contextd.client_base; here each method is
an `async def`, and `transcript()` / `search()` are async iterators. Calls from one event loop run
concurrently on one HTTP/2 connection: `await asyncio.gather(*(cx.assemble(...) for ...))`.

grpc.aio binds a channel to the event loop it was created in: create the client inside the loop
that uses it (in an `async def`), and close it there (`async with`, or `await cx.close()`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message

from contextd.channels import Metadata, TlsConfig, open_aio_channel
from contextd.client_base import ClientBase
from contextd.pages import SearchPages, TranscriptPages
from contextd.sessions import SessionLike
from contextd.v1 import search_pb2 as SR
from contextd.v1 import types_pb2

__all__ = ["AsyncClient"]


class AsyncClient(ClientBase):
    __doc__ = ClientBase.__doc__

    asynchronous = True
    channel: grpc.aio.Channel

    def _open(self, address: str, tls: TlsConfig | None, options: Iterable[tuple[str, Any]]) -> grpc.aio.Channel:
        return open_aio_channel(address, tls=tls, options=options)

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def _unary(self, rpc: str, request: Message, timeout: float | None, metadata: Iterable[tuple[str, str]]) -> Any:
        call, deadline, call_metadata = self._prepare(rpc, timeout, metadata)
        try:
            return await call(request, timeout=deadline, metadata=call_metadata)
        except grpc.RpcError as err:
            raise self._failed(err, rpc) from err

    # --- readiness and health ------------------------------------------------------------------

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the channel is connected (default: up to the client's timeout); raises
        ContextdError UNAVAILABLE when it is not by then. Calls do not need it: use it to fail
        fast at start-up on a wrong address."""
        wait = self._ready_wait(timeout)
        try:
            await asyncio.wait_for(self.channel.channel_ready(), wait)
        except asyncio.TimeoutError as err:
            raise self._not_ready(wait) from err

    async def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """grpc.health.v1 Check of `service` ("" = the server): "SERVING", "NOT_SERVING", ..."""
        return self._health_name(await self._unary("Check", self._health_request(service), timeout, ()))

    # --- conveniences --------------------------------------------------------------------------

    async def transcript(self, session: SessionLike, page_size: int = 1000, *, timeout: float | None = None,
                         metadata: Metadata = ()) -> AsyncIterator[types_pb2.TranscriptEntry]:
        """Every entry of the session's transcript, in order, following page tokens to the end
        (`async for entry in cx.transcript(...)`). `timeout` bounds each page's call."""
        pages = TranscriptPages(session, page_size)
        while (fields := pages.next()) is not None:
            for entry in pages.take(await self.get_transcript(timeout=timeout, metadata=metadata, **fields)):
                yield entry

    async def search(self, session: SessionLike, query: str, *, limit: int = 100, timeout: float | None = None,
                     metadata: Metadata = (), **fields: Any) -> AsyncIterator[SR.SearchHit]:
        """At most `limit` hits for `query` (SearchTranscript's other fields as keywords: `scope`,
        `order`), following page tokens (`async for hit in cx.search(...)`). `timeout` bounds each page's call."""
        pages = SearchPages(session, query, limit, fields)
        while (request := pages.next()) is not None:
            for hit in pages.take(await self.search_transcript(timeout=timeout, metadata=metadata, **request)):
                yield hit
