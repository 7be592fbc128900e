"""JSON-lines logging for engines: one object per line on stderr, as contextd and the TypeScript
SDK log, so that contextd's managed-sidecar relay and log pipelines read every engine alike:

    {"time":"2025-03-03T09:00:00.123Z","level":"info","engine":"window","msg":"registered with the registry","endpoint":"127.0.0.1:40123"}

Structured fields go in `extra` (`ctx.log.info("assembled", extra={"session": "s1"})`); the
EngineLogger adapter adds its own (engine, rpc, request_id) to every record.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["EngineLogger", "JsonFormatter", "engine_logger", "parse_level"]

LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error", logging.CRITICAL: "fatal"}
_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "critical": logging.CRITICAL,
    "silent": logging.CRITICAL + 10,
}
# Attributes every LogRecord has; whatever else is on a record came from `extra`.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


def parse_level(text: str) -> int | None:
    """The logging level of a name as contextd spells them (debug, info, warn, error, silent...)."""
    return _LEVELS.get(text.strip().lower())


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, the record's extra fields, msg; `err` for exceptions."""

    def format(self, record: logging.LogRecord) -> str:
        now = record.created
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
            "level": LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
        }
        extras = {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS and not k.startswith("_")}
        out.update(extras)
        out["msg"] = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            out["err"] = {"type": type(err).__name__, "message": str(err), "stack": self.formatException(record.exc_info)}
        return json.dumps(out, separators=(",", ":"), default=str, ensure_ascii=False)


class EngineLogger(logging.LoggerAdapter):
    """A LoggerAdapter whose fields are merged with each call's `extra` (the stock adapter replaces
    them), and that makes children with more fields: `log.child(rpc="Assemble")`."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs

    def child(self, **fields: Any) -> EngineLogger:
        return EngineLogger(self.logger, {**(self.extra or {}), **fields})

    @property
    def fields(self) -> Mapping[str, Any]:
        return dict(self.extra or {})


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (tests swap it), and never raises on a closed one."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # stderr closed: nothing sensible left to do


def engine_logger(engine_id: str, level: int, logger: logging.Logger | None = None) -> EngineLogger:
    """The engine's logger: `logger` as given (its handlers are the caller's business), or the
    `contextd.engine.<id>` logger writing JSON lines to stderr at `level`."""
    if logger is None:
        logger = logging.getLogger(f"contextd.engine.{engine_id}")
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            logger.addHandler(_StderrHandler())
        # Not through the root logger: an application's logging.basicConfig would print each line twice.
        logger.propagate = False
        logger.setLevel(level)
    return EngineLogger(logger, {"engine": engine_id})
