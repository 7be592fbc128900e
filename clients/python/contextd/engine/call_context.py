"""What an engine method gets besides its request: deadline, cancellation, host client, logger."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc

from .call_scope import CallScope, CancelCause
from .errors import EngineError

if TYPE_CHECKING:
    from .host_client import HostClient
    from .logs import EngineLogger

__all__ = ["CallContext"]


@dataclass
class CallContext:
    """Passed to every engine method with its request.

    `cancelled` is set when the caller cancels the call or its deadline passes: stop working then,
    whatever the method returns afterwards goes nowhere. Long loops check `ctx.cancelled.is_set()`
    (or call `ctx.raise_if_cancelled()`); blocking waits use `ctx.cancelled.wait(seconds)`; other
    work can be hooked with `ctx.on_cancel(fn)`. Host calls made through `ctx.host` are cancelled
    with the call by themselves. An `async def` method is cancelled at its `await` instead
    (asyncio.CancelledError), with `cancelled` and `cancel_cause` already set when it hears of it.
    """

    #: The RPC being served, e.g. "Assemble".
    method: str
    #: The incoming gRPC metadata, first value per key (bytes for `-bin` keys).
    metadata: Mapping[str, str | bytes]
    #: The caller's deadline as epoch seconds (time.time()), or None when it set none.
    deadline: float | None
    #: Set when the caller cancels or the deadline passes.
    cancelled: threading.Event
    #: A logger adapter carrying the engine id, the RPC and the request id.
    log: EngineLogger
    #: HostService with this call's HostContext credentials and deadline; None when the request
    #: carried no HostContext (only Bootstrap, Ingest, IngestBatch, Assemble, Compact, AfterTurn,
    #: Maintain and PrepareSubagentSpawn do).
    host: HostClient | None = None
    #: The caller's x-request-id (or one made up for the logs).
    request_id: str = ""
    _scope: CallScope | None = field(default=None, repr=False)

    def time_remaining(self) -> float | None:
        """Seconds until the deadline (never negative), or None when there is none. 0 once the
        deadline has ended the call: gRPC may end it a moment before this clock reaches it."""
        if self.deadline is None:
            return None
        if self.cancel_cause == "deadline":
            return 0.0
        return max(0.0, self.deadline - time.time())

    @property
    def cancel_cause(self) -> CancelCause | None:
        """Why `cancelled` is set: "deadline" or "cancelled" (by the caller); None while it is not."""
        return self._scope.cause if self._scope else None

    def raise_if_cancelled(self) -> None:
        """Raises EngineError(CANCELLED or DEADLINE_EXCEEDED) once the call has ended."""
        if self.cancelled.is_set():
            code, message = self._scope.status() if self._scope else (grpc.StatusCode.CANCELLED, "the call was cancelled")
            raise EngineError(code, message)

    def on_cancel(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Runs `fn` (on a gRPC thread) when the call is cancelled — at once if it already was.
        Returns a function that unhooks it."""
        if self._scope is None:
            return lambda: None
        return self._scope.on_cancel(fn)
