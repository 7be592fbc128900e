"""contextd.v1.ContextEngineService over an Engine: each RPC gets a CallContext, answers are
converted to the response type, errors mapped to gRPC statuses.

One servicer serves both kinds of server. On grpcio's threaded server (an engine of plain `def`
methods) each handler runs the method in the server's worker thread. On grpc.aio (an engine with an
`async def` method, serve.py) each handler is a coroutine: an `async def` method is awaited on the
engine's event loop, a plain one runs in the worker threads (as on the threaded server, with a
blocking HostClient). What a call is — its CallContext, its answer, its failure, its end by the
caller — is decided by the same code for both (`_begin`, `_answer`, `_failure`, `_ended`).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message

from contextd.v1 import engine_pb2, engine_pb2_grpc, types_pb2

from .call_context import CallContext
from .call_scope import CallScope
from .definition import Engine
from .errors import EngineError
from .host_client import AsyncHostChannels, AsyncHostClient, HostChannels, HostClient
from .logs import EngineLogger

__all__ = ["EngineServicer", "status_of"]

REQUEST_ID_KEY = "x-request-id"
TRACE_KEYS = ("traceparent", "tracestate")


@dataclass(frozen=True)
class _Rpc:
    name: str  # as in the proto, for logs and errors
    attr: str  # the Engine field
    response: type[Message]
    session: Callable[[Any], types_pb2.SessionRef | None] | None = None
    host: bool = True
    #: The answer when the engine does not implement the RPC (None: UNIMPLEMENTED).
    fallback: Callable[[], Message] | None = None


def _session(req: Any) -> types_pb2.SessionRef | None:
    return req.session if req.HasField("session") else None


def _child(req: Any) -> types_pb2.SessionRef | None:
    return req.child if req.HasField("child") else None


def _spawn(req: Any) -> types_pb2.SessionRef | None:
    # The host token is scoped to one session; for a spawn that is the child being prepared.
    if req.HasField("child"):
        return req.child
    return req.parent if req.HasField("parent") else None


# Request ids only need to be unique in this process's logs: a prefix per process and a counter.
_ID_PREFIX = f"{os.getpid():x}{int(time.time()) & 0xFFFF:04x}"
_request_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _request_id(metadata: Mapping[str, Any]) -> str:
    value = metadata.get(REQUEST_ID_KEY)
    if isinstance(value, str) and value:
        return value
    with _ids_lock:
        return f"{_ID_PREFIX}-{next(_request_ids):x}"


_SURROGATES = re.compile("[\ud800-\udfff]")


def status_of(err: BaseException, scope: CallScope | None = None) -> tuple[grpc.StatusCode, str]:
    """The status an engine method's exception answers: an EngineError (or any error carrying a
    grpc.StatusCode `code`, such as contextd.ContextdError) keeps its code and message, a gRPC error
    its status; anything else is a bug and answers INTERNAL with the message."""
    if scope is not None and scope.cancelled.is_set():
        code, details = scope.status()
    elif isinstance(err, EngineError):
        code, details = err.code, err.message
    elif isinstance(getattr(err, "code", None), grpc.StatusCode) and err.code is not grpc.StatusCode.OK:  # type: ignore[attr-defined]
        code, details = err.code, str(getattr(err, "message", None) or err)  # type: ignore[attr-defined]
    elif isinstance(err, grpc.RpcError) and callable(getattr(err, "code", None)):
        code, details = err.code(), err.details() or str(err)  # type: ignore[attr-defined]
    else:
        code, details = grpc.StatusCode.INTERNAL, f"internal error: {str(err) or type(err).__name__}"
    # grpcio sends details as UTF-8: a lone surrogate (half of a pair, from text a caller sent)
    # cannot be encoded and would turn the answer into a transport error.
    return code, _SURROGATES.sub("\ufffd", details)


def _finish_assemble(req: Any, value: Any, res: Any, log: EngineLogger) -> None:
    """estimated_tokens defaults to the sum of the returned messages' token counts, kept ones included."""
    explicit = isinstance(value, Mapping) and "estimated_tokens" in value
    if not explicit and res.estimated_tokens == 0:
        counts = {m.id: m.token_count for m in req.messages} if res.kept_entry_ids else {}
        res.estimated_tokens = sum(m.token_count for m in res.messages) + sum(counts.get(i, 0) for i in res.kept_entry_ids)
    if (
        req.HasField("token_budget")
        and res.estimated_tokens > req.token_budget
        and res.prompt_authority != types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW
    ):
        log.warning(
            "assembled context is over the token budget; the registry treats this as a contract violation "
            "(answer PREASSEMBLY_MAY_OVERFLOW if intended)",
            extra={"estimated_tokens": res.estimated_tokens, "token_budget": req.token_budget},
        )


class EngineServicer(engine_pb2_grpc.ContextEngineServiceServicer):
    """One handler per RPC, made from the Engine's methods at construction: blocking handlers for
    grpcio's threaded server, or coroutines for grpc.aio when `executor` is given (it runs the
    engine's plain `def` methods; `aio_host_channels` serves the `async def` ones' HostService calls)."""

    def __init__(
        self,
        engine: Engine,
        info: engine_pb2.EngineInfo,
        log: EngineLogger,
        host_channels: HostChannels,
        *,
        executor: Executor | None = None,
        aio_host_channels: AsyncHostChannels | None = None,
    ) -> None:
        self._engine = engine
        self._info = info
        self._log = log
        self._host_channels = host_channels
        self._aio_host_channels = aio_host_channels
        self._executor = executor
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        #: The async calls' method tasks still running (aio only), for the drain on stop.
        self.tasks: set[asyncio.Future[Any]] = set()
        subagents = info.capabilities.subagents
        empty = (lambda kind: (lambda: kind())) if subagents else (lambda kind: None)
        rpcs = [
            _Rpc("Bootstrap", "bootstrap", engine_pb2.BootstrapResponse, _session),
            _Rpc("Ingest", "ingest", engine_pb2.IngestResponse, _session, fallback=lambda: engine_pb2.IngestResponse(ingested=True)),
            _Rpc("IngestBatch", "ingest_batch", engine_pb2.IngestBatchResponse, _session),
            _Rpc("Assemble", "assemble", engine_pb2.ContextEngineServiceAssembleResponse, _session),
            _Rpc("Compact", "compact", engine_pb2.ContextEngineServiceCompactResponse, _session),
            _Rpc("AfterTurn", "after_turn", engine_pb2.ContextEngineServiceAfterTurnResponse, _session),
            _Rpc("Maintain", "maintain", engine_pb2.ContextEngineServiceMaintainResponse, _session),
            _Rpc(
                "PrepareSubagentSpawn",
                "prepare_subagent_spawn",
                engine_pb2.ContextEngineServicePrepareSubagentSpawnResponse,
                _spawn,
                fallback=empty(engine_pb2.ContextEngineServicePrepareSubagentSpawnResponse),
            ),
            _Rpc(
                "RollbackSubagentSpawn",
                "rollback_subagent_spawn",
                engine_pb2.ContextEngineServiceRollbackSubagentSpawnResponse,
                _child,
                host=False,
                fallback=empty(engine_pb2.ContextEngineServiceRollbackSubagentSpawnResponse),
            ),
            _Rpc("OnSubagentEnded", "on_subagent_ended", engine_pb2.OnSubagentEndedResponse, _child, host=False, fallback=empty(engine_pb2.OnSubagentEndedResponse)),
            _Rpc("Dispose", "dispose", engine_pb2.DisposeResponse, None, host=False),
            _Rpc("ForgetSession", "forget_session", engine_pb2.ForgetSessionResponse, _session, host=False),
        ]
        for rpc in rpcs:
            # add_ContextEngineServiceServicer_to_server looks the handlers up by RPC name.
            setattr(self, rpc.name, self._handler(rpc) if executor is None else self._async_handler(rpc))
        if executor is not None:
            self.GetInfo = self._get_info_async  # type: ignore[method-assign]

    @property
    def inflight(self) -> int:
        """Engine method calls under way (for the drain on stop)."""
        with self._inflight_lock:
            return self._inflight

    def GetInfo(self, request: engine_pb2.GetInfoRequest, context: grpc.ServicerContext) -> engine_pb2.GetInfoResponse:
        return engine_pb2.GetInfoResponse(info=self._info)

    async def _get_info_async(self, request: engine_pb2.GetInfoRequest, context: grpc.aio.ServicerContext) -> engine_pb2.GetInfoResponse:
        return engine_pb2.GetInfoResponse(info=self._info)

    # ------------------------------------------------------------------ the threaded server's

    def _handler(self, rpc: _Rpc) -> Callable[[Any, grpc.ServicerContext], Message]:
        impl = getattr(self._engine, rpc.attr)
        rpc_log = self._log.child(rpc=rpc.name)

        def handle(request: Any, context: grpc.ServicerContext) -> Message:
            if impl is None:
                if rpc.fallback is not None:
                    return rpc.fallback()
                context.abort(*self._unimplemented(rpc))
            return self._serve(rpc, impl, rpc_log, request, context)

        handle.__name__ = rpc.name
        return handle

    def _serve(self, rpc: _Rpc, impl: Callable[..., Any], rpc_log: EngineLogger, request: Any, context: grpc.ServicerContext) -> Message:
        scope = CallScope.of(context)
        ctx, log = self._begin(rpc, rpc_log, request, context, scope, asynchronous=False)
        if scope.cancelled.is_set():
            # The deadline had passed when the call arrived: do not start the work at all.
            context.abort(*scope.status())
        started = self._enter()
        try:
            response = self._answer(rpc, request, impl(request, ctx), log)
        except Exception as err:  # every failure becomes a status; nothing escapes to grpcio
            context.abort(*self._failure(rpc, err, scope, log, started))
        finally:
            self._leave()
        ended = self._ended(scope, log, started)
        if ended is not None:
            context.abort(*ended)
        return response

    # ------------------------------------------------------------------------- grpc.aio's

    def _async_handler(self, rpc: _Rpc) -> Callable[[Any, grpc.aio.ServicerContext], Any]:
        impl = getattr(self._engine, rpc.attr)
        rpc_log = self._log.child(rpc=rpc.name)

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Message:
            if impl is None:
                if rpc.fallback is not None:
                    return rpc.fallback()
                await context.abort(*self._unimplemented(rpc))
            return await self._serve_async(rpc, impl, rpc_log, request, context)

        handle.__name__ = rpc.name
        return handle

    async def _serve_async(self, rpc: _Rpc, impl: Callable[..., Any], rpc_log: EngineLogger, request: Any, context: grpc.aio.ServicerContext) -> Message:
        scope = CallScope.of_aio(context)
        is_async = inspect.iscoroutinefunction(impl)
        ctx, log = self._begin(rpc, rpc_log, request, context, scope, asynchronous=is_async)
        if scope.cancelled.is_set():
            await context.abort(*scope.status())
        started = self._enter()
        # The method runs as a task (or in a worker thread) of its own, so that when the call ends
        # under it the scope says why *before* the method hears of it (CancelledError, ctx.cancelled).
        if is_async:
            work: asyncio.Future[Any] = asyncio.ensure_future(impl(request, ctx))
        else:
            work = asyncio.get_running_loop().run_in_executor(self._executor, impl, request, ctx)
        self.tasks.add(work)
        work.add_done_callback(self._work_done)
        try:
            value = await asyncio.shield(work)
            response = self._answer(rpc, request, value, log)
        except asyncio.CancelledError:
            # grpc.aio cancels the handler when the caller cancels or the deadline passes.
            if not work.done():
                scope.terminated()
                work.cancel()
                log.debug("call ended by the caller", extra={"code": scope.status()[0].name, "ms": _ms(started)})
            raise
        except Exception as err:  # every failure becomes a status; nothing escapes to grpc.aio
            await context.abort(*self._failure(rpc, err, scope, log, started))
        ended = self._ended(scope, log, started)
        if ended is not None:
            await context.abort(*ended)
        return response

    def _work_done(self, work: asyncio.Future[Any]) -> None:
        self.tasks.discard(work)
        self._leave()
        if not work.cancelled() and work.exception() is not None:
            work.exception()  # retrieved: the handler has mapped it (or the call had ended)

    # ------------------------------------------------------------------------------ both

    def _unimplemented(self, rpc: _Rpc) -> tuple[grpc.StatusCode, str]:
        return grpc.StatusCode.UNIMPLEMENTED, f'engine "{self._info.id}" does not implement {rpc.name}'

    def _begin(
        self, rpc: _Rpc, rpc_log: EngineLogger, request: Any, context: Any, scope: CallScope, *, asynchronous: bool
    ) -> tuple[CallContext, EngineLogger]:
        """The CallContext of one call (its host client blocking or awaitable, as the method is)."""
        metadata: dict[str, Any] = {}
        for key, value in context.invocation_metadata() or ():
            metadata.setdefault(key, value)
        request_id = _request_id(metadata)
        log = rpc_log.child(request_id=request_id)
        session = rpc.session(request) if rpc.session else None
        host: HostClient | None = None
        if rpc.host and request.HasField("host") and request.host.endpoint:
            trace = tuple((k, metadata[k]) for k in TRACE_KEYS if isinstance(metadata.get(k), str) and metadata[k])
            if asynchronous and self._aio_host_channels is not None:
                host = AsyncHostClient(self._aio_host_channels, request.host, scope, session, trace)
            else:
                host = HostClient(self._host_channels, request.host, scope, session, trace)
        ctx = CallContext(
            method=rpc.name,
            metadata=metadata,
            deadline=scope.deadline,
            cancelled=scope.cancelled,
            log=log,
            host=host,
            request_id=request_id,
            _scope=scope,
        )
        return ctx, log

    def _enter(self) -> float:
        with self._inflight_lock:
            self._inflight += 1
        return time.monotonic()

    def _leave(self) -> None:
        with self._inflight_lock:
            self._inflight -= 1

    def _answer(self, rpc: _Rpc, request: Any, value: Any, log: EngineLogger) -> Message:
        response = self._convert(rpc, value)
        if rpc.name == "Assemble":
            _finish_assemble(request, value, response, log)
        return response

    def _failure(self, rpc: _Rpc, err: Exception, scope: CallScope, log: EngineLogger, started: float) -> tuple[grpc.StatusCode, str]:
        """The status a method's exception answers, logged as what it was."""
        code, details = status_of(err, scope)
        scope.finish()
        if scope.cancelled.is_set():
            log.debug("call ended by the caller", extra={"code": code.name, "ms": _ms(started)})
        elif code == grpc.StatusCode.INTERNAL:
            log.error(f"{rpc.attr}() failed", exc_info=err)
        else:
            log.warning(f"{rpc.attr}() answered an error", extra={"code": code.name, "reason": details})
        return code, details

    @staticmethod
    def _ended(scope: CallScope, log: EngineLogger, started: float) -> tuple[grpc.StatusCode, str] | None:
        """After an answer: the status to end with when the call had ended meanwhile, else None."""
        scope.finish()
        if scope.cancelled.is_set():
            code, details = scope.status()
            log.debug("answer dropped: the call had already ended", extra={"code": code.name, "ms": _ms(started)})
            return code, details
        log.debug("ok", extra={"ms": _ms(started)})
        return None

    @staticmethod
    def _convert(rpc: _Rpc, value: Any) -> Message:
        kind = rpc.response
        if value is None:
            return kind()
        if isinstance(value, kind):
            return value
        if isinstance(value, Mapping):
            try:
                return kind(**value)
            except (TypeError, ValueError) as err:
                raise TypeError(f"{rpc.attr}() returned a dict that is not a {kind.DESCRIPTOR.name}: {err}") from err
        raise TypeError(f"{rpc.attr}() returned a {type(value).__name__}, expected a {kind.DESCRIPTOR.name}, a dict of its fields or None")


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
