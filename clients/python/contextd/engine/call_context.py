"""What an engine method gets besides its request: deadline, cancellation, host client, logger."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import grpc

from .errors import EngineError

if TYPE_CHECKING:
    from .host_client import HostClient
    from .logs import EngineLogger

__all__ = ["CallContext", "CallScope"]

CancelCause = Literal["cancelled", "deadline"]

# grpcio reports "no deadline" as a remaining time of centuries; anything beyond this is none.
_NO_DEADLINE_S = 10 * 365 * 24 * 3600.0
# A cancellation this close to the deadline is the caller enforcing it: contextd cancels an engine
# call at its own deadline, and sends a transport deadline 25 ms later (src/registry/remote-engine.ts)
# so the engine is still told; the cancel then arrives a little before the deadline the engine sees.
_DEADLINE_SLACK_S = 0.05


class CallScope:
    """The cancellation side of one engine call.

    grpcio runs a termination callback when the caller cancels, when the deadline passes (the server
    core enforces it) and when the call completes; the callback counts as a cancellation only while
    the method is still working on the answer.
    """

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.cancelled = threading.Event()
        self.cause: CancelCause | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self._finished = False

    @classmethod
    def of(cls, context: grpc.ServicerContext) -> CallScope:
        remaining = context.time_remaining()
        deadline = None if remaining is None or remaining > _NO_DEADLINE_S else time.time() + remaining
        scope = cls(deadline)
        if not context.add_callback(scope._terminated) or (deadline is not None and remaining <= 0):
            # The call had already ended (or its deadline passed) when it reached us.
            scope.cancel("deadline" if deadline is not None and remaining <= 0 else "cancelled")
        return scope

    def _terminated(self) -> None:
        late = self.deadline is not None and time.time() >= self.deadline - _DEADLINE_SLACK_S
        self.cancel("deadline" if late else "cancelled")

    def cancel(self, cause: CancelCause) -> None:
        with self._lock:
            if self._finished or self.cause is not None:
                return
            self.cause = cause
            callbacks, self._callbacks = self._callbacks, []
        self.cancelled.set()
        for fn in callbacks:
            try:
                fn()
            except Exception:  # a cancel hook must not keep the others from running
                pass

    def finish(self) -> None:
        """The method has answered: a termination callback from now on is just the call completing."""
        with self._lock:
            self._finished = True
            self._callbacks = []

    def on_cancel(self, fn: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            if self.cause is None:
                self._callbacks.append(fn)
                return lambda: self._remove(fn)
        fn()
        return lambda: None

    def _remove(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if fn in self._callbacks:
                self._callbacks.remove(fn)

    def status(self) -> tuple[grpc.StatusCode, str]:
        """The status for a call that ended by the caller's doing."""
        if self.cause == "deadline":
            return grpc.StatusCode.DEADLINE_EXCEEDED, "the caller's deadline passed"
        return grpc.StatusCode.CANCELLED, "the caller cancelled the call"


@dataclass
class CallContext:
    """Passed to every engine method with its request.

    `cancelled` is set when the caller cancels the call or its deadline passes: stop working then,
    whatever the method returns afterwards goes nowhere. Long loops check `ctx.cancelled.is_set()`
    (or call `ctx.raise_if_cancelled()`); blocking waits use `ctx.cancelled.wait(seconds)`; other
    work can be hooked with `ctx.on_cancel(fn)`. Host calls made through `ctx.host` are cancelled
    with the call by themselves.
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
        """Seconds until the deadline (never negative), or None when there is none."""
        if self.deadline is None:
            return None
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
