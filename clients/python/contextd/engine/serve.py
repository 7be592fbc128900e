"""serve_engine: an Engine as a sidecar — ContextEngineService and grpc.health.v1 on `listen`,
registered with contextd's registry when one is configured, stopped gracefully on SIGTERM.

An engine of plain `def` methods is served on grpcio's threaded server, as it always was. An engine
with an `async def` method is served on grpc.aio, on an event loop of the engine's own (aio_server.py):
its coroutines run concurrently there, its plain methods in the worker threads. Registration,
heartbeats, signals and the drain are the same code for both — the Registrar keeps its thread
whichever server answers the calls, so an async engine registers, renews, retries refusals and
deregisters exactly as a sync one does.

Why not grpc.aio for every engine: a sync engine would gain nothing and lose what it relies on.
grpc.aio runs a plain handler through its `migration_thread_pool` with a context (grpcio 1.51's
_SyncServicerContext) that has no `is_active()` (Health.Watch needs it) and whose termination
callback fires only once the handler returns, so a blocking method would not see its caller's
deadline or cancel as `ctx.cancelled`. So sync engines keep the threaded server unchanged, and on
grpc.aio every handler is a coroutine: the servicer awaits an `async def` method, and runs a plain
one in the worker threads itself, setting `ctx.cancelled` when the call ends under it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from concurrent import futures
from typing import Any

import grpc

from contextd.health.v1 import health_pb2_grpc
from contextd.v1 import engine_pb2, engine_pb2_grpc, registry_pb2

from .definition import Engine
from .engine_id import engine_id_problem
from .errors import EngineDefinitionError, EngineStartError
from .aio_server import AioServer
from .health import AsyncHealth, Health
from .host_client import AsyncHostChannels, HostChannels
from .logs import EngineLogger, engine_logger, parse_level
from .listen import bind
from .options import ServeOptions, resolve_options
from .registration import Registrar, RegistrationSettings, RegistrationStatus
from .servicer import EngineServicer

__all__ = ["RunningEngine", "serve_engine"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve_engine(engine: Engine, **options: Any) -> RunningEngine:
    """Serves `engine` (see ServeOptions for the options and the environment they default from).

    With block=True (the default) it serves until SIGTERM/SIGINT, then turns health NOT_SERVING,
    deregisters, lets in-flight calls finish for `drain_timeout` seconds and returns the stopped
    engine (the program then ends with exit code 0). With block=False it returns the running engine
    at once. A start that fails (an invalid Engine or option, an address that cannot be bound)
    prints one line to stderr and exits 2 when blocking, and raises EngineStartError otherwise.
    """
    exit_on_error = options.get("exit_on_error")
    if exit_on_error is None:
        exit_on_error = options.get("block", True) is not False
    try:
        if not isinstance(engine, Engine):
            raise EngineDefinitionError(f"invalid engine definition: serve_engine takes an Engine, not {type(engine).__name__}")
        info = engine.info()
        running = RunningEngine(engine, info, resolve_options(options))
    except EngineStartError as err:
        if exit_on_error:
            name = getattr(engine, "id", None)
            program = name if isinstance(name, str) and engine_id_problem(name) is None else "serve_engine"
            sys.stderr.write(f"{program}: {' '.join(str(err).split())}\n")
            sys.stderr.flush()
            sys.exit(2)
        raise
    if running.options.block:
        running._serve_until_stopped()
    return running


class RunningEngine:
    """A serving engine: what it answers, where, and how to stop it. Use as a context manager to
    stop it on exit (tests: `with serve_engine(engine, block=False, registry="") as running:`)."""

    def __init__(self, engine: Engine, info: engine_pb2.EngineInfo, options: ServeOptions) -> None:
        self.options = options
        #: What GetInfo answers (capabilities derived from the Engine).
        self.info = info
        level = parse_level(options.log_level) or logging.INFO
        self.log: EngineLogger = engine_logger(info.id, level, options.logger)
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopping = False
        self._deregister_on_request = True
        self._previous_handlers: dict[int, Any] = {}

        self._executor = futures.ThreadPoolExecutor(max_workers=options.max_workers, thread_name_prefix=f"{info.id}-rpc")
        server_options = [
            ("grpc.max_receive_message_length", options.max_message_bytes),
            ("grpc.max_send_message_length", options.max_message_bytes),
            # A port in use must fail the bind, not be shared with another process.
            ("grpc.so_reuseport", 0),
        ]
        self._host_channels = HostChannels(options.tls)
        self._health = Health()
        self._aio: AioServer | None = None
        self._aio_host_channels: AsyncHostChannels | None = None
        health_servicer: Any = self._health
        if engine.asynchronous:
            self._aio = AioServer(info.id, server_options, self.log)
            self._aio_host_channels = AsyncHostChannels(self._aio.loop, options.tls)
            self._servicer = EngineServicer(
                engine, info, self.log, self._host_channels, executor=self._executor, aio_host_channels=self._aio_host_channels
            )
            self._server: Any = self._aio
            health_servicer = AsyncHealth(self._health)
        else:
            self._server = grpc.server(self._executor, options=server_options)
            self._servicer = EngineServicer(engine, info, self.log, self._host_channels)
        engine_pb2_grpc.add_ContextEngineServiceServicer_to_server(self._servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, self._server)
        try:
            #: The bound address (host:port with the real port, or unix:/path).
            self.address, self.endpoint = bind(
                self._server,
                options.listen,
                advertise=options.advertise,
                registering=bool(options.registry),
                server_credentials=options.server_credentials,
                log=self.log,
            )
        except EngineStartError:
            self._executor.shutdown(wait=False)
            if self._aio is not None:
                self._aio.close()
            raise
        self._server.start()
        self._health.set_serving(True)

        self._registrar: Registrar | None = None
        if options.registry:
            settings = RegistrationSettings(
                registry=options.registry,
                engine_id=info.id,
                owner=options.owner,
                owner_token=options.owner_token,
                endpoint=self.endpoint,
                instance_id=options.instance_id or "",
                node=options.node or "",
                zone=options.zone or "",
                replica=options.replica or "",
                allow_same_owner_refresh=options.allow_same_owner_refresh,
                heartbeat=options.heartbeat,
                retry_initial=options.retry_initial,
                retry_max=options.retry_max,
                tls=options.tls,
            )
            self._registrar = Registrar(settings, self.log)
        if options.handle_signals:
            self._install_signal_handlers()
        if options.parent_pid:
            threading.Thread(target=self._watch_parent, args=(options.parent_pid,), name=f"{info.id}-parent-watch", daemon=True).start()
        caps = info.capabilities
        self.log.info(
            "engine listening",
            extra={
                "address": self.address,
                "endpoint": self.endpoint,
                "registry": options.registry,
                "pid": os.getpid(),
                "server": "grpc.aio" if self._aio is not None else "grpc",
                "capabilities": {f.name: getattr(caps, f.name) for f in caps.DESCRIPTOR.fields},
            },
        )
        if self._registrar is not None:
            self._registrar.start()
        else:
            self.log.info("no registry configured (CONTEXTD_REGISTRY): serving without registering")

    # ------------------------------------------------------------------------------------ public

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the engine's `async def` methods run on (None for an engine of plain
        methods): `asyncio.run_coroutine_threadsafe(open_pool(), running.loop)` prepares something
        they share."""
        return self._aio.loop if self._aio is not None else None

    @property
    def registration(self) -> RegistrationStatus | None:
        """Where registration stands now (None when no registry is configured)."""
        return self._registrar.status if self._registrar else None

    def wait_registered(self, timeout: float | None = None) -> registry_pb2.RegisterEngineResponse | None:
        """The first registration's answer (None without a registry). Raises RegistrationError when
        it was refused for good, TimeoutError when it did not happen within `timeout` seconds."""
        return self._registrar.wait_registered(timeout) if self._registrar else None

    def set_health(self, serving: bool) -> None:
        """grpc.health.v1 SERVING or NOT_SERVING, for "" and contextd.v1.ContextEngineService."""
        self._health.set_serving(serving)

    def stop(self, deregister: bool = True) -> None:
        """Deregister (unless `deregister=False`), NOT_SERVING, let in-flight calls finish for
        `drain_timeout` and cancel the rest, run `on_shutdown`. Idempotent; a second caller waits.

        Deregistering first (as the protocol and the TypeScript SDK do): a health check that saw
        NOT_SERVING while the engine is still registered would count against it."""
        with self._stop_lock:
            already = self._stopping
            self._stopping = True
        if already:
            self._stopped.wait()
            return
        started = time.monotonic()
        self._stop_requested.set()
        self._restore_signal_handlers()
        if self._registrar is not None:
            # Leave the registry first, so contextd stops routing here; then NOT_SERVING, then drain.
            self._registrar.stop(deregister)
        self._health.set_serving(False)
        if self._aio is not None:
            self._aio.stop(self.options.drain_timeout, tuple(self._servicer.tasks)).wait()
        else:
            self._server.stop(self.options.drain_timeout).wait()
        if self._servicer.inflight:
            self.log.warning(
                "in-flight calls did not finish in time; they were cancelled",
                extra={"inflight": self._servicer.inflight, "drain_timeout_ms": round(self.options.drain_timeout * 1000)},
            )
        self._host_channels.close()
        if self._aio is not None:
            assert self._aio_host_channels is not None
            self._aio_host_channels.close()
            self._aio.close()
        self._executor.shutdown(wait=False)
        if self.options.on_shutdown is not None:
            try:
                self.options.on_shutdown()
            except Exception:
                self.log.exception("on_shutdown failed")
        self.log.info("engine stopped", extra={"took_ms": round((time.monotonic() - started) * 1000)})
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the engine has stopped (True) or `timeout` seconds passed (False)."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> RunningEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------- internals

    def _serve_until_stopped(self) -> None:
        try:
            # Wake up regularly: signal handlers run in the main thread between waits.
            while not self._stop_requested.wait(0.5):
                pass
        except KeyboardInterrupt:  # SIGINT when the engine does not handle signals itself
            pass
        self.stop(deregister=self._deregister_on_request)
        if self._servicer.inflight:
            # An engine method that ignores cancellation keeps its (non-daemon) worker thread alive,
            # and the interpreter would wait for it forever at exit.
            self.log.warning("exiting with engine methods still running")
            logging.shutdown()
            os._exit(0)

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            self.log.debug("not handling SIGTERM/SIGINT: serve_engine was not called from the main thread")
            return
        for sig in _SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers.clear()

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._stop_requested.is_set():
            return
        self.log.info("signal received: deregistering and draining", extra={"signal": signal.Signals(signum).name})
        self._stop_requested.set()
        if not self.options.block:
            # Nobody waits in _serve_until_stopped: stop here, in the main thread, and end the program.
            self.stop(deregister=self._deregister_on_request)
            raise SystemExit(0)

    def _watch_parent(self, pid: int) -> None:
        """A managed sidecar must not outlive a contextd that was killed without a chance to stop it."""
        was_parent = os.getppid() == pid
        while not self._stop_requested.wait(1.0):
            if _alive(pid) and (not was_parent or os.getppid() == pid):
                continue
            self.log.warning("contextd (parent process) is gone; stopping", extra={"parent_pid": pid})
            # contextd is gone, and its registry with it: nothing to deregister from.
            self._deregister_on_request = False
            if self.options.block:
                self._stop_requested.set()
            elif self._previous_handlers:
                os.kill(os.getpid(), signal.SIGTERM)  # ends the program through _on_signal
            else:
                self.stop(deregister=False)
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
