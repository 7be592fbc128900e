"""`Engine`: a context engine as a dataclass of plain functions, and the EngineInfo derived from it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, NoReturn, Union

from contextd.v1 import engine_pb2

from .delegate import delegate_compaction_to_host
from .engine_id import engine_id_problem
from .errors import EngineDefinitionError

if TYPE_CHECKING:
    from .call_context import CallContext

__all__ = ["PROTOCOL_VERSIONS", "Engine", "EngineMethod"]

#: The engine protocol versions this SDK speaks (src/contract/engine-api.ts PROTOCOL_VERSION).
PROTOCOL_VERSIONS = (1,)

#: An engine method: `fn(request, ctx)` returning the response proto, a dict of its fields, or None
#: (the empty response).
EngineMethod = Callable[[Any, "CallContext"], Any]

_MAINTENANCE_MODES = {
    "foreground": engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND,
    "background": engine_pb2.TURN_MAINTENANCE_MODE_BACKGROUND,
}
_MODE_VALUES = {
    engine_pb2.TURN_MAINTENANCE_MODE_UNSPECIFIED: engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND,
    engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND: engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND,
    engine_pb2.TURN_MAINTENANCE_MODE_BACKGROUND: engine_pb2.TURN_MAINTENANCE_MODE_BACKGROUND,
}

REQUIRED_METHODS = ("assemble", "compact")
OPTIONAL_METHODS = (
    "ingest",
    "ingest_batch",
    "bootstrap",
    "after_turn",
    "maintain",
    "prepare_subagent_spawn",
    "rollback_subagent_spawn",
    "on_subagent_ended",
    "dispose",
    "forget_session",
)
SUBAGENT_METHODS = ("prepare_subagent_spawn", "rollback_subagent_spawn", "on_subagent_ended")


@dataclass
class Engine:
    """A context engine. `id`, `name`, `assemble` and `compact` are required; which optional methods
    are set decides `EngineInfo.capabilities` (the same table as the TypeScript SDK):

    =====================================================================  ==============
    method(s)                                                              capability
    =====================================================================  ==============
    bootstrap                                                              bootstrap
    ingest_batch                                                           ingest_batch
    after_turn                                                             after_turn
    maintain                                                               maintain
    any of prepare_subagent_spawn, rollback_subagent_spawn, on_subagent_ended  subagents
    dispose                                                                dispose
    forget_session                                                         forget
    =====================================================================  ==============

    An optional RPC that is not set answers UNIMPLEMENTED, except: Ingest answers `ingested=true`
    (the host has stored the message already), and within `subagents` a missing one of the three
    answers its empty response. Every method is `fn(request, ctx: CallContext)` and returns the
    response proto, a dict of its fields, or None; it may be an `async def` (then the engine is
    served on grpc.aio, and its plain `def` methods run in worker threads as before).

    `host_requirements` lists the HostService capabilities the engine calls ("transcript-rewrite",
    "host-compaction", "llm-complete"), which contextd refuses to an engine that did not declare
    them; `compact=delegate_compaction_to_host` adds "host-compaction" by itself.
    """

    id: str
    name: str
    assemble: EngineMethod
    compact: EngineMethod
    version: str = "0.0.0"
    #: True when the engine manages its budget and compaction: the host then never compacts natively
    #: before Assemble (unless Assemble answers PREASSEMBLY_MAY_OVERFLOW).
    owns_compaction: bool = False
    #: "foreground", "background" or a contextd.v1 TurnMaintenanceMode value.
    turn_maintenance_mode: Union[str, int] = "foreground"
    host_requirements: Sequence[str] = ()
    ingest: EngineMethod | None = None
    ingest_batch: EngineMethod | None = None
    bootstrap: EngineMethod | None = None
    after_turn: EngineMethod | None = None
    maintain: EngineMethod | None = None
    prepare_subagent_spawn: EngineMethod | None = None
    rollback_subagent_spawn: EngineMethod | None = None
    on_subagent_ended: EngineMethod | None = None
    dispose: EngineMethod | None = None
    #: A session was deleted in contextd: purge everything derived from it. May come more than once,
    #: and for a session the engine never saw (answer `purged=False`); raising makes contextd retry.
    forget_session: EngineMethod | None = None

    def validate(self) -> None:
        """Raises EngineDefinitionError naming the first problem, so that a mistake shows at start
        rather than as a refused registration or an UNIMPLEMENTED later."""
        if not isinstance(self.id, str):
            _fail(f"`id` must be a string, not {type(self.id).__name__}")
        problem = engine_id_problem(self.id)
        if problem:
            _fail(f"`id` {self.id!r} {problem}")
        if not isinstance(self.name, str) or not self.name.strip():
            _fail("`name` must be a non-empty string")
        if not isinstance(self.version, str):
            _fail("`version` must be a string")
        if not isinstance(self.owns_compaction, bool):
            _fail("`owns_compaction` must be True or False")
        mode = self.turn_maintenance_mode
        if not (mode in _MAINTENANCE_MODES or (isinstance(mode, int) and not isinstance(mode, bool) and mode in _MODE_VALUES)):
            _fail('`turn_maintenance_mode` must be "foreground", "background" or a TurnMaintenanceMode value')
        reqs = self.host_requirements
        if isinstance(reqs, (str, bytes)) or not all(isinstance(r, str) and r.strip() for r in reqs):
            _fail("`host_requirements` must be a sequence of non-empty strings (a list, not one string)")
        for name in REQUIRED_METHODS:
            if not callable(getattr(self, name)):
                _fail(f"`{name}` must be a function (it is {_describe(getattr(self, name))})")
        for name in OPTIONAL_METHODS:
            value = getattr(self, name)
            if value is not None and not callable(value):
                _fail(f"`{name}` must be a function or None (it is {_describe(value)})")
        for name in REQUIRED_METHODS + OPTIONAL_METHODS:
            value = getattr(self, name)
            # An object whose __call__ is a coroutine, or a function returning one, would never be awaited.
            if value is not None and not inspect.iscoroutinefunction(value) and inspect.iscoroutinefunction(getattr(value, "__call__", None)):
                _fail(f"`{name}` is an object with an async __call__: pass an `async def` function (or its bound method)")

    @property
    def asynchronous(self) -> bool:
        """True when a method is an `async def`: serve_engine then serves the engine on grpc.aio."""
        return any(inspect.iscoroutinefunction(getattr(self, name)) for name in REQUIRED_METHODS + OPTIONAL_METHODS)

    def capabilities(self) -> engine_pb2.EngineCapabilities:
        return engine_pb2.EngineCapabilities(
            bootstrap=self.bootstrap is not None,
            ingest_batch=self.ingest_batch is not None,
            after_turn=self.after_turn is not None,
            maintain=self.maintain is not None,
            subagents=any(getattr(self, m) is not None for m in SUBAGENT_METHODS),
            dispose=self.dispose is not None,
            forget=self.forget_session is not None,
        )

    def info(self) -> engine_pb2.EngineInfo:
        """What GetInfo answers: the static fields plus derived capabilities and protocol versions."""
        self.validate()
        mode = self.turn_maintenance_mode
        return engine_pb2.EngineInfo(
            id=self.id,
            name=self.name,
            version=self.version,
            owns_compaction=self.owns_compaction,
            turn_maintenance_mode=_MAINTENANCE_MODES[mode] if isinstance(mode, str) else _MODE_VALUES[mode],
            capabilities=self.capabilities(),
            host_requirements=self._host_requirements(),
            protocol_versions=PROTOCOL_VERSIONS,
        )

    def _host_requirements(self) -> list[str]:
        declared = list(self.host_requirements)
        # The SDK's own delegating compact calls DelegateCompaction, which needs `host-compaction`.
        if self.compact is delegate_compaction_to_host and "host-compaction" not in declared:
            declared.append("host-compaction")
        return declared


ENGINE_FIELDS = frozenset(f.name for f in fields(Engine))


def _fail(problem: str) -> NoReturn:
    raise EngineDefinitionError(f"invalid engine definition: {problem}")


def _describe(value: object) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"
