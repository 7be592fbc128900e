"""The cancellation side of one engine call: the caller's deadline and cancel, seen by the method.

Its own module so that the host client (which cancels host calls with it) and the call context
(which holds a host client) do not import each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

import grpc
import grpc.aio

from .errors import EngineError

__all__ = ["CallScope", "CancelCause"]

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
        if not context.add_callback(scope.terminated) or (deadline is not None and remaining <= 0):
            # The call had already ended (or its deadline passed) when it reached us.
            scope.cancel("deadline" if deadline is not None and remaining <= 0 else "cancelled")
        return scope

    @classmethod
    def of_aio(cls, context: grpc.aio.ServicerContext) -> CallScope:
        """The scope of a call on grpc.aio, which ends a call by cancelling its handler: the handler
        calls `terminated()` then (servicer.py), not a termination callback."""
        remaining = context.time_remaining()
        deadline = None if remaining is None or remaining > _NO_DEADLINE_S else time.time() + remaining
        scope = cls(deadline)
        if deadline is not None and remaining <= 0:
            scope.cancel("deadline")
        return scope

    def terminated(self) -> None:
        """The call ended while the method was working: by its deadline, or by its caller."""
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
