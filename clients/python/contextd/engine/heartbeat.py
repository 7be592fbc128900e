"""Reads the registry's answers to the registration heartbeat (GetEngine), as the TypeScript SDK's
HeartbeatWatch does.

A heartbeat runs every few seconds, so the watch remembers what it last reported (registry down, a
failing heartbeat, a quarantine, another instance holding the id) and logs a lasting condition when
it starts and when it ends, not on every beat.

With a contextd that lists instances (EngineStatus.instances), this instance is registered while its
endpoint is among them; when it is not (deregistered alone, say), it registers again, which adds it
beside the others.

With an older contextd, only NOT_FOUND means the registry lost the engine. Another endpoint under
the id means another instance of this engine (a replica, or the next version in a rolling deploy)
registered after us: registering again would take the id back, the other would do the same on its
next heartbeat, and the two would keep resetting each other's registration. So this instance leaves
the id to the other and keeps heartbeating; when the other deregisters (NOT_FOUND), it registers
again.
"""

from __future__ import annotations

from typing import Literal

import grpc

from contextd.v1 import registry_pb2

from .logs import EngineLogger

__all__ = ["TRANSIENT", "HeartbeatWatch", "Verdict"]

#: What the Registrar does next: schedule the next beat (intact / displaced / unknown), register
#: again (lost) or stop heartbeating (disabled).
Verdict = Literal["intact", "displaced", "unknown", "lost", "disabled"]

#: Statuses that mean "the registry is not there (yet)": keep trying.
TRANSIENT = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
    }
)


class HeartbeatWatch:
    def __init__(self, log: EngineLogger, engine_id: str, endpoint: str, instance_id: str = "") -> None:
        self._log = log
        self._engine_id = engine_id
        self._endpoint = endpoint
        #: As the registry names this instance: its endpoint unless it named itself.
        self._instance_id = instance_id or endpoint
        self._registry_down = False
        self._problem = ""
        self._last_quarantine = ""
        #: The endpoint of the other instance that holds the id, while one does.
        self._held_by = ""

    def registered(self) -> None:
        """The engine (re)registered: an outage, failure or takeover seen before is over. A quarantine is not."""
        self._registry_down = False
        self._problem = ""
        self._held_by = ""

    def answered(self, engine: registry_pb2.EngineStatus | None) -> Verdict:
        """GetEngine answered: is it this engine at this endpoint?"""
        if engine is None:
            return self._failed_with("GetEngine answered without the engine")
        if self._registry_down:
            self._log.info("registry reachable again")
        self._registry_down = False
        self._problem = ""
        # A contextd with instances lists them: registering again when this one is not among them
        # displaces nobody (docs/registry.md, "Instances").
        if len(engine.instances) > 0:
            mine = next((i for i in engine.instances if i.instance_id == self._instance_id), None)
            if mine is None:
                self._log.warning(f"the registry no longer has this instance of {self._engine_id}; registering again")
                self._held_by = ""
                return "lost"
            self._report_quarantine(mine.quarantine if mine.HasField("quarantine") else None)
            return "intact"
        if engine.endpoint != self._endpoint:
            if engine.endpoint != self._held_by:
                self._log.warning(
                    f"another instance now holds the registration of {self._engine_id} at {engine.endpoint}; not re-registering",
                    extra={"registered_endpoint": engine.endpoint},
                )
                self._held_by = engine.endpoint
            return "displaced"
        if self._held_by:
            self._log.info("the registry points at this instance again", extra={"previous_endpoint": self._held_by})
            self._held_by = ""
        self._report_quarantine(engine.quarantine if engine.HasField("quarantine") else None)
        return "intact"

    def _report_quarantine(self, q: registry_pb2.QuarantineState | None) -> None:
        """Logs a quarantine of this engine (or instance) when it starts and when it ends."""
        quarantine = f"{q.operation}: {q.reason}" if q is not None else ""
        if quarantine == self._last_quarantine:
            return
        if q is not None:
            self._log.warning("the registry has quarantined this engine", extra={"operation": q.operation, "reason": q.reason})
        else:
            self._log.info("the registry released this engine from quarantine")
        self._last_quarantine = quarantine

    def failed(self, err: grpc.RpcError) -> Verdict:
        """GetEngine failed."""
        code = err.code()
        if code == grpc.StatusCode.NOT_FOUND:
            if self._held_by:
                why = f"the other instance at {self._held_by} gave up the registration of {self._engine_id}; registering again"
            elif self._registry_down:
                why = "the registry is back without this engine (it restarted); registering again"
            else:
                why = "the registry no longer has this engine; registering again"
            self._log.warning(why)
            self._registry_down = False
            self._held_by = ""
            return "lost"
        if code in TRANSIENT:
            if not self._registry_down:
                self._log.warning("registry unreachable; will check the registration again when it is back", extra={"code": code.name})
            self._registry_down = True
            return "unknown"
        if code == grpc.StatusCode.UNIMPLEMENTED:
            self._log.warning("the registry does not implement GetEngine; registration heartbeat disabled")
            return "disabled"
        return self._failed_with(f"{code.name}: {err.details()}")

    def _failed_with(self, problem: str) -> Verdict:
        if problem != self._problem:
            self._log.warning("registration heartbeat failed", extra={"reason": problem})
        self._problem = problem
        return "unknown"
