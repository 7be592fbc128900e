"""Shared pieces of the engine SDK's unit tests: in-process gRPC servers, a log capture, message
builders, and waiting for conditions without sleeping for a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
import unittest
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from contextd.engine import Engine, RunningEngine, delegate_compaction_to_host, serve_engine
from contextd.engine.definition import OPTIONAL_METHODS, REQUIRED_METHODS
from contextd.engine.logs import JsonFormatter
from contextd.v1 import types_pb2


class LogCapture(logging.Handler):
    """Collects the JSON lines an engine logs (through a logger of its own, passed as `logger=`)."""

    _count = 0

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        LogCapture._count += 1
        self.logger = logging.getLogger(f"contextd.tests.engine.{LogCapture._count}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        line = json.loads(self.format(record))
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def messages(self) -> list[str]:
        with self._cond:
            return [line["msg"] for line in self.lines]

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if pred(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching log line within {timeout} s; lines: {self.lines}")
                self._cond.wait(left)


def serve_in_process(add: Callable[[grpc.Server], None], port: int = 0) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[("grpc.so_reuseport", 0)])
    add(server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, f"127.0.0.1:{bound}"


def wait_for(pred: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Polls `pred` until it is truthy: for state that has no event to wait on (a fake registry's)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        value = pred()
        if value:
            return value
        time.sleep(0.01)
    return pred()


def minimal(**overrides: Any) -> Engine:
    fields: dict[str, Any] = {
        "id": "test-engine",
        "name": "Test engine",
        "version": "0.1.0",
        "assemble": lambda req, ctx: {"messages": req.messages},
        "compact": lambda req, ctx: {"ok": True, "compacted": False, "reason": "nothing to do"},
    }
    fields.update(overrides)
    return Engine(**fields)


def asynced(engine: Engine) -> Engine:
    """`engine` with each plain method made an `async def` that awaits it in a worker thread
    (asyncio.to_thread), so that a scenario written for a sync engine runs on grpc.aio: the method's
    task is what the call's end cancels, and the blocking body still sees ctx.cancelled. The SDK's
    own delegate_compaction_to_host stays a plain def (a mixed engine: it runs in the worker threads)."""
    changes: dict[str, Any] = {}
    for name in REQUIRED_METHODS + OPTIONAL_METHODS:
        fn = getattr(engine, name)
        if fn is None or fn is delegate_compaction_to_host or inspect.iscoroutinefunction(fn):
            continue

        async def method(req: Any, ctx: Any, fn: Any = fn) -> Any:
            return await asyncio.to_thread(fn, req, ctx)

        changes[name] = method
    copy = Engine(**{**{f: getattr(engine, f) for f in engine.__dataclass_fields__}, **changes})
    assert copy.asynchronous
    return copy


class EngineTestCase(unittest.TestCase):
    """Serves engines in process (no registry, no signal handling) and stops them after each test.
    A subclass with `asynchronous = True` serves every engine with `async def` methods (`asynced`),
    on grpc.aio: the same scenarios, against the other server."""

    asynchronous = False

    def serve(self, engine: Engine, **options: Any) -> tuple[RunningEngine, LogCapture]:
        if self.asynchronous and not engine.asynchronous:
            engine = asynced(engine)
        logs = LogCapture()
        settings: dict[str, Any] = {"block": False, "registry": "", "handle_signals": False, "drain_timeout": 1.0, "logger": logs.logger}
        settings.update(options)
        running = serve_engine(engine, **settings)
        self.addCleanup(running.stop, False)
        return running, logs

    def channel(self, address: str) -> grpc.Channel:
        channel = grpc.insecure_channel(address)
        self.addCleanup(channel.close)
        return channel


def text(value: str) -> types_pb2.ContentBlock:
    return types_pb2.ContentBlock(text=types_pb2.TextBlock(text=value))


def message(role: int, value: str, tokens: int, id: str) -> types_pb2.Message:
    return types_pb2.Message(id=id, role=role, content=[text(value)], token_count=tokens)
