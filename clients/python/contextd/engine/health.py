"""grpc.health.v1 for the engine's server: Check, Watch and List on "" and the engine service."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import grpc
import grpc.aio

from contextd.health.v1 import health_pb2, health_pb2_grpc

__all__ = ["ENGINE_SERVICE", "AsyncHealth", "Health"]

ENGINE_SERVICE = "contextd.v1.ContextEngineService"

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class Health(health_pb2_grpc.HealthServicer):
    """Both names share one status: the engine serves, or it does not. It starts NOT_SERVING, turns
    SERVING once the server is up, and NOT_SERVING again when the engine stops (so that contextd's
    health probes stop routing to it before the server goes away)."""

    # How often a Watch stream checks that its caller is still there.
    WATCH_POLL_S = 1.0

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._status = {"": NOT_SERVING, ENGINE_SERVICE: NOT_SERVING}
        self._version = 0
        #: AsyncHealth's Watch streams waiting for a change: (their loop, their event).
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def set_serving(self, serving: bool) -> None:
        with self._cond:
            for name in self._status:
                self._status[name] = SERVING if serving else NOT_SERVING
            self._version += 1
            self._cond.notify_all()
            waiters = list(self._waiters)
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    def current(self, service: str) -> tuple[int | None, int]:
        """The status of `service` (None: unknown) and the version it was set at."""
        with self._cond:
            return self._status.get(service), self._version

    def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext) -> health_pb2.HealthCheckResponse:
        with self._cond:
            status = self._status.get(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext) -> Iterator[health_pb2.HealthCheckResponse]:
        last = None
        while context.is_active():
            with self._cond:
                status = self._status.get(request.service, SERVICE_UNKNOWN)
                version = self._version
            if status != last:
                yield health_pb2.HealthCheckResponse(status=status)
                last = status
            with self._cond:
                if self._version == version:
                    self._cond.wait(self.WATCH_POLL_S)

    def List(self, request: health_pb2.HealthListRequest, context: grpc.ServicerContext) -> health_pb2.HealthListResponse:
        with self._cond:
            statuses = dict(self._status)
        res = health_pb2.HealthListResponse()
        for name, status in statuses.items():
            res.statuses[name].status = status
        return res


class AsyncHealth(health_pb2_grpc.HealthServicer):
    """grpc.health.v1 on grpc.aio (an engine with `async def` methods), over the same Health state."""

    def __init__(self, health: Health) -> None:
        self._health = health

    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        status, _ = self._health.current(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        # Ends when the caller goes away: grpc.aio cancels the stream's task.
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        self._health._waiters.add(waiter)
        try:
            last = None
            while True:
                waiter[1].clear()
                status, _ = self._health.current(request.service)
                status = SERVICE_UNKNOWN if status is None else status
                if status != last:
                    yield health_pb2.HealthCheckResponse(status=status)
                    last = status
                await waiter[1].wait()
        finally:
            self._health._waiters.discard(waiter)

    async def List(self, request: health_pb2.HealthListRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthListResponse:
        return self._health.List(request, context)  # type: ignore[arg-type]
