"""Keeps an engine registered with contextd's RegistryService (the TypeScript SDK's Registrar):

- RegisterEngine(engine_id, owner, endpoint, allow_same_owner_refresh, protocol_versions=[1]) with
  `authorization: Bearer <owner token>`; while the registry is unreachable (UNAVAILABLE,
  DEADLINE_EXCEEDED, ...) or refuses with UNREACHABLE (it could not dial us yet) or TOO_MANY_INSTANCES
  (its id is at engines.max_instances until a dead instance is removed), retries with
  exponential backoff and jitter;
- a permanent refusal (DEFAULT_SLOT_RESERVED, OWNED_BY_OTHER, ALREADY_REGISTERED, CONTRACT_INVALID,
  VERSION_UNSUPPORTED, ENDPOINT_NOT_ALLOWED) or a non-transient status (UNAUTHENTICATED,
  PERMISSION_DENIED, ...) is logged as an error and not retried; the engine keeps serving;
- once registered, asks GetEngine every `heartbeat` seconds and registers again when the registry
  answers NOT_FOUND (contextd restarted without the registration, or it was deregistered), so the
  engine comes back by itself; another instance holding the id is left alone (heartbeat.py);
- stop(deregister=True) ends the loop and deregisters, unless the registry now points at another
  instance or never had this one.
"""

from __future__ import annotations

import copy
import random
import threading
from dataclasses import dataclass
from typing import Any, Literal

import grpc

from contextd.channels import TlsConfig, bearer, open_channel
from contextd.v1 import registry_pb2, registry_pb2_grpc

from .definition import PROTOCOL_VERSIONS
from .errors import RegistrationError
from .heartbeat import TRANSIENT, HeartbeatWatch
from .logs import EngineLogger

__all__ = ["Registrar", "RegistrationSettings", "RegistrationStatus", "backoff_delay"]

#: Refusals that may pass later: UNREACHABLE (contextd could not dial the engine yet),
#: TOO_MANY_INSTANCES (the id is at engines.max_instances until a dead instance is removed).
#: Every other one is final.
RETRIED_REFUSALS = frozenset({registry_pb2.REFUSAL_UNREACHABLE, registry_pb2.REFUSAL_TOO_MANY_INSTANCES})


@dataclass(frozen=True)
class RegistrationSettings:
    registry: str
    engine_id: str
    owner: str
    owner_token: str | None
    #: Where the registry reaches this engine.
    endpoint: str
    #: Which instance of the engine this is; "": its endpoint (docs/registry.md, "Instances").
    instance_id: str = ""
    #: Where it runs (RegisterEngineRequest.locality).
    node: str = ""
    zone: str = ""
    replica: str = ""
    allow_same_owner_refresh: bool = True
    heartbeat: float = 2.0
    retry_initial: float = 0.2
    retry_max: float = 5.0
    tls: TlsConfig | None = None
    #: One RegisterEngine call: the registry dials the engine (GetInfo, health) before it answers.
    register_timeout: float = 15.0


@dataclass
class RegistrationStatus:
    """Where registration stands, for logs, health endpoints and tests."""

    state: Literal["registering", "registered", "failed", "stopped"] = "registering"
    #: Successful RegisterEngine calls so far (more than one after the registry lost the engine).
    registrations: int = 0
    last_response: registry_pb2.RegisterEngineResponse | None = None
    #: Why the state is "failed", or the last transient failure while "registering".
    last_error: RegistrationError | None = None


def backoff_delay(attempt: int, initial: float, maximum: float) -> float:
    """Seconds before retry `attempt` (from 0): doubling from `initial` up to `maximum`, with "equal
    jitter" (half to all of the step) so engines waiting for the same registry spread out."""
    base = min(maximum, initial * 2 ** min(attempt, 30))
    return base / 2 + random.random() * base / 2


class _Stopped(Exception):
    """A call refused or cancelled because the Registrar is stopping: no failure, the loop just ends."""


class Registrar:
    def __init__(self, settings: RegistrationSettings, log: EngineLogger) -> None:
        self.settings = settings
        self._log = log.child(registry=settings.registry, endpoint=settings.endpoint)
        self._metadata = bearer(settings.owner_token)
        self._watch = HeartbeatWatch(self._log, settings.engine_id, settings.endpoint, settings.instance_id or settings.endpoint)
        self._status = RegistrationStatus()
        self._first = threading.Event()
        self._first_outcome: registry_pb2.RegisterEngineResponse | RegistrationError | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._inflight: grpc.Future | None = None
        self._may_be_registered = False
        self._channel = open_channel(settings.registry, tls=settings.tls)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._thread = threading.Thread(target=self._run, name=f"{settings.engine_id}-registrar", daemon=True)

    @property
    def status(self) -> RegistrationStatus:
        with self._lock:
            return copy.copy(self._status)

    def start(self) -> None:
        self._thread.start()

    def wait_registered(self, timeout: float | None = None) -> registry_pb2.RegisterEngineResponse:
        """The first registration's answer; raises RegistrationError when it failed for good, and
        TimeoutError when it has not happened within `timeout` seconds."""
        if not self._first.wait(timeout):
            raise TimeoutError(f"engine {self.settings.engine_id!r} is not registered yet")
        outcome = self._first_outcome
        if isinstance(outcome, RegistrationError):
            raise outcome
        assert outcome is not None
        return outcome

    def stop(self, deregister: bool = True) -> None:
        """Stops retries and heartbeats; deregisters when asked and the registration may be ours."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            inflight = self._inflight
        if inflight is not None:
            inflight.cancel()
        self._thread.join(timeout=5.0)
        self._set(state="stopped")
        self._settle_first(RegistrationError("the engine stopped before it was registered"))
        try:
            if deregister and self._may_be_registered:
                self._deregister()
        finally:
            self._channel.close()

    # ------------------------------------------------------------------------------------ calls

    def _call(self, method: Any, request: Any, timeout: float, during_stop: bool = False) -> Any:
        if self._stop.is_set() and not during_stop:
            raise _Stopped()
        future = method.future(request, timeout=timeout, metadata=self._metadata)
        with self._lock:
            self._inflight = future
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise _Stopped() from None
        finally:
            with self._lock:
                self._inflight = None

    def _deregister(self) -> None:
        engine_id = self.settings.engine_id
        # A newer instance of this engine may have replaced us (allow_same_owner_refresh): then the
        # registration is not ours to remove.
        try:
            res = self._call(self._stub.GetEngine, registry_pb2.GetEngineRequest(engine_id=engine_id), 1.0, True)
            if len(res.engine.instances) > 0:
                # This instance only: the engine's other instances serve on (docs/registry.md, "Instances").
                if not any(i.instance_id == (self.settings.instance_id or self.settings.endpoint) for i in res.engine.instances):
                    self._log.info("not deregistering: the registry does not hold this instance")
                    return
            elif res.engine.endpoint and res.engine.endpoint != self.settings.endpoint:
                self._log.info("not deregistering: the registration now points at another instance", extra={"registered_endpoint": res.engine.endpoint})
                return
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:
                self._log.info("not deregistering: the registry does not hold this engine")
                return
            # Unknown: deregister anyway (that is what stopping asks for).
        try:
            # It registered under its endpoint; a contextd without instances ignores the field.
            request = registry_pb2.DeregisterEngineRequest(engine_id=engine_id, instance_id=self.settings.instance_id or self.settings.endpoint)
            self._call(self._stub.DeregisterEngine, request, 2.0, True)
            self._log.info("deregistered from the registry")
        except grpc.RpcError as err:
            self._log.warning("deregistration failed (ignored)", extra={"code": err.code().name, "reason": err.details()})

    # ------------------------------------------------------------------------------------- loop

    def _run(self) -> None:
        try:
            if not self._register("initial"):
                return
            while not self._stop.wait(self.settings.heartbeat):
                if not self._heartbeat():
                    return
        except _Stopped:
            return
        except Exception:  # a bug: say so instead of dying silently
            self._log.exception("registration loop crashed")

    def _register(self, why: Literal["initial", "lost"]) -> bool:
        """Registers, retrying transient failures. False when refused for good or stopped."""
        s = self.settings
        self._set(state="registering")
        request = registry_pb2.RegisterEngineRequest(
            engine_id=s.engine_id,
            owner=s.owner,
            endpoint=s.endpoint,
            allow_same_owner_refresh=s.allow_same_owner_refresh,
            protocol_versions=PROTOCOL_VERSIONS,
            instance_id=s.instance_id,
        )
        if s.node or s.zone or s.replica:
            request.locality.CopyFrom(registry_pb2.Locality(node=s.node, zone=s.zone, replica=s.replica))
        attempt = 0
        while not self._stop.is_set():
            before = self._may_be_registered
            # From here on the registry may hold this instance (even if the answer gets lost).
            self._may_be_registered = True
            fields: dict[str, Any]
            try:
                res = self._call(self._stub.RegisterEngine, request, s.register_timeout)
                if res.ok:
                    self._on_registered(res, why, attempt)
                    return True
                refusal = registry_pb2.Refusal.Name(res.refusal).removeprefix("REFUSAL_")
                owner = f' (held by owner "{res.existing_owner}")' if res.existing_owner else ""
                error = RegistrationError(
                    f'registry refused engine "{s.engine_id}": {refusal}{owner}{": " + res.message if res.message else ""}',
                    refusal=res.refusal,
                    response=res,
                )
                transient = res.refusal in RETRIED_REFUSALS
                fields = {"refusal": refusal}
            except grpc.RpcError as err:
                code = err.code()
                if code == grpc.StatusCode.UNAVAILABLE:
                    self._may_be_registered = before  # the request never reached a registry
                error = RegistrationError(f'registering engine "{s.engine_id}" failed: {code.name}: {err.details()}', code=code)
                transient = code in TRANSIENT
                fields = {"code": code.name}
            if self._stop.is_set():
                return False
            self._set(last_error=error)
            if not transient:
                # Refused or rejected: whatever the registry holds under this id is not this instance.
                self._may_be_registered = False
                self._set(state="failed")
                self._log.error(f"{error}; not retrying (the engine keeps serving)", extra=fields)
                self._settle_first(error)
                return False
            delay = backoff_delay(attempt, s.retry_initial, s.retry_max)
            # The first failure and then every tenth is a warning; the rest are debug noise.
            level = "warning" if attempt % 10 == 0 else "debug"
            getattr(self._log, level)(f"{error}; retrying", extra={"attempt": attempt + 1, "retry_in_ms": round(delay * 1000), **fields})
            attempt += 1
            if self._stop.wait(delay):
                return False
        return False

    def _on_registered(self, res: registry_pb2.RegisterEngineResponse, why: str, attempt: int) -> None:
        with self._lock:
            self._status.state = "registered"
            self._status.registrations += 1
            self._status.last_response = res
            self._status.last_error = None
        self._watch.registered()
        self._log.info(
            "registered with the registry" if why == "initial" else "registered again with the registry",
            extra={"owner": self.settings.owner, "protocol_version": res.protocol_version, "attempts": attempt + 1},
        )
        self._settle_first(res)

    def _heartbeat(self) -> bool:
        """Does the registry still hold this engine? False when heartbeating should stop."""
        timeout = min(5.0, max(1.0, self.settings.heartbeat))
        try:
            res = self._call(self._stub.GetEngine, registry_pb2.GetEngineRequest(engine_id=self.settings.engine_id), timeout)
            verdict = self._watch.answered(res.engine if res.HasField("engine") else None)
        except grpc.RpcError as err:
            verdict = self._watch.failed(err)
        if verdict == "lost":
            return self._register("lost")
        return verdict != "disabled"

    def _set(self, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(self._status, key, value)

    def _settle_first(self, outcome: registry_pb2.RegisterEngineResponse | RegistrationError) -> None:
        if self._first.is_set():
            return
        self._first_outcome = outcome
        self._first.set()
