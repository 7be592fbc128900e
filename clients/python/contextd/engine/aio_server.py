"""A grpc.aio server on an event loop of its own, for engines with `async def` methods.

serve_engine serves such an engine on grpc.aio (the engine's coroutines then run concurrently on one
loop: a method that awaits a model or a database holds no thread), and everything around the server
stays what it is for every engine: the Registrar's thread, the signal handlers, the parent watch,
RunningEngine.stop. So the loop runs in a thread of its own, and AioServer offers the part of
grpc.Server's interface RunningEngine and listen.bind use (add_generic_rpc_handlers, add_*_port,
start, stop returning an event), each run on the loop and waited for.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

import grpc
import grpc.aio

from .logs import EngineLogger

__all__ = ["AioServer"]

T = TypeVar("T")


class AioServer:
    def __init__(self, name: str, options: Sequence[tuple[str, Any]], log: EngineLogger) -> None:
        #: The engine's event loop: its `async def` methods run here.
        self.loop = asyncio.new_event_loop()
        self._log = log
        # What asyncio would print as plain text (a task's exception nobody retrieved, a callback
        # that raised) goes to the engine's JSON log instead.
        self.loop.set_exception_handler(self._loop_error)
        self._thread = threading.Thread(target=self._run, name=f"{name}-loop", daemon=True)
        self._thread.start()
        # grpc.aio binds a server to the loop it is created in.
        self._server: grpc.aio.Server = self._on_loop(lambda: grpc.aio.server(options=list(options)))

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self._log.error(f"event loop: {context.get('message', 'error')}", exc_info=context.get("exception"))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coroutine: Awaitable[T]) -> T:
        """Runs `coroutine` on the loop and waits for its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(_awaited(coroutine), self.loop).result()

    def _on_loop(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return self.call(run())

    # --- what grpc.Server offers -------------------------------------------------------------------

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._on_loop(lambda: self._server.add_generic_rpc_handlers(handlers))

    def add_insecure_port(self, address: str) -> int:
        return self._on_loop(lambda: self._server.add_insecure_port(address))

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self._on_loop(lambda: self._server.add_secure_port(address, credentials))

    def start(self) -> None:
        self.call(self._server.start())

    def stop(self, grace: float | None, tasks: Collection[asyncio.Future[Any]] = ()) -> threading.Event:
        """Refuses new calls, lets those in flight finish for `grace` seconds, then cancels them and
        waits (briefly) for the engine methods' tasks in `tasks` to wind down. Returns a set event."""
        self.call(self._stop(grace, tasks))
        stopped = threading.Event()
        stopped.set()
        return stopped

    async def _stop(self, grace: float | None, tasks: Collection[asyncio.Future[Any]]) -> None:
        await self._server.stop(grace)
        pending = [t for t in tasks if not t.done()]
        if pending:
            # Cancelled with their calls; a plain `def` method still running in a thread is not waited for.
            await asyncio.wait(pending, timeout=1.0)

    def close(self) -> None:
        """Ends the loop (after stop) and its thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self.loop.close()


async def _awaited(value: Awaitable[T]) -> T:
    return await value
