"""Both clients behind one surface, so that a scenario is written once and run against each.

A scenario is an `async def` that awaits the client's methods and iterates with `async for`: an
AsyncClient is used as it is; a Client is wrapped in `Blocking`, which calls the real blocking
method when the scenario awaits it (so its errors surface at the same line as an AsyncClient's).
Nothing here stands in for contextd or for either client: both make their real calls.

    for kind in KINDS:
        asyncio.run(scenario(kind))

    async def scenario(kind):
        async with open_client(kind, address) as cx:
            await cx.assemble(session="s", token_budget=100)
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import contextd

KINDS = ("Client", "AsyncClient")


class Blocking:
    """A contextd.Client seen through AsyncClient's surface."""

    def __init__(self, client: contextd.Client) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.client, name)
        if not callable(value):
            return value
        if inspect.isgeneratorfunction(getattr(type(self.client), name, None)):
            return lambda *args, **kwargs: _aiter(value(*args, **kwargs))
        return _awaitable(value)

    async def __aenter__(self) -> Blocking:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.client.close()


def _awaitable(method: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return call


async def _aiter(items: Iterator[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def open_client(kind: str, *args: Any, **kwargs: Any) -> Any:
    """A client of `kind` ("Client" or "AsyncClient") with the constructor arguments of both; use it
    as `async with`. Call it inside the running event loop (grpc.aio binds the channel to it)."""
    if kind == "AsyncClient":
        return contextd.AsyncClient(*args, **kwargs)
    if kind == "Client":
        return Blocking(contextd.Client(*args, **kwargs))
    raise ValueError(f"unknown client kind {kind!r} (one of {', '.join(KINDS)})")


async def collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]
