"""Keeps the engine registered with contextd's RegistryService (same behaviour as the TypeScript
engine SDK's Registrar):

- RegisterEngine(engine_id, owner, endpoint, allow_same_owner_refresh=True, protocol_versions=[1])
  with `authorization: Bearer <owner token>`; while the registry is unreachable (UNAVAILABLE,
  DEADLINE_EXCEEDED, ...) or answers REFUSAL_UNREACHABLE (it could not dial us yet), retries with
  exponential backoff and jitter (200 ms doubling up to 5 s);
- a permanent refusal (DEFAULT_SLOT_RESERVED, OWNED_BY_OTHER, ALREADY_REGISTERED, CONTRACT_INVALID,
  VERSION_UNSUPPORTED, ENDPOINT_NOT_ALLOWED) or a non-transient status (UNAUTHENTICATED,
  PERMISSION_DENIED, ...) is logged as an error and not retried; the engine keeps serving;
- once registered, every `heartbeat_s` (2 s) asks GetEngine(engine_id) and registers again when the
  registry answers NOT_FOUND (contextd restarted without the registration, or it was deregistered),
  so the engine comes back by itself;
- when GetEngine names another endpoint, another instance of this engine (a replica, or the next
  version in a rolling deploy) has taken the id over: this one logs a warning once and does NOT
  register again (two instances would otherwise keep taking the id from each other, each
  registration resetting the other's registry state); it keeps heartbeating, so it registers again
  once the other instance deregisters and the id is NOT_FOUND;
- stop(deregister=True) stops the loop and deregisters, unless the registry now points at another
  instance (a newer copy of this engine took the id over) or never had us.
"""

import random
import threading

import grpc

from contextd.v1 import registry_pb2, registry_pb2_grpc

TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
CHANNEL_OPTIONS = [
    # Reconnect quickly when the registry comes (back) up instead of backing off for minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
# RegisterEngine: the registry dials the engine (GetInfo + health) before it answers.
REGISTER_TIMEOUT_S = 15.0


class _Stopped(Exception):
    pass


class Registrar:
    def __init__(self, log, registry, engine_id, owner, owner_token, endpoint, protocol_versions,
                 heartbeat_s=2.0, retry_initial_s=0.2, retry_max_s=5.0):
        self.log = log.child(registry=registry, endpoint=endpoint)
        self.registry = registry
        self.engine_id = engine_id
        self.owner = owner
        self.endpoint = endpoint
        self.protocol_versions = list(protocol_versions)
        self.heartbeat_s = heartbeat_s
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = max(retry_initial_s, retry_max_s)
        self.metadata = (("authorization", "Bearer " + owner_token),) if owner_token else ()
        self.state = "registering"  # registering | registered | failed | stopped
        self.registrations = 0
        self.registered = threading.Event()  # set at the first successful registration
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._inflight = None
        self._may_be_registered = False
        self._registry_down = False
        self._last_quarantine = ""
        self._heartbeat_problem = ""
        self._held_by = ""  # the endpoint of the other instance holding the id, while one does
        self._channel = grpc.insecure_channel(registry, options=CHANNEL_OPTIONS)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._thread = threading.Thread(target=self._run, name="registrar", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self, deregister=True):
        """Stops retries and heartbeats; deregisters when asked and the registration may be ours."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            inflight = self._inflight
        if inflight is not None:
            inflight.cancel()
        self._thread.join(timeout=5.0)
        self.state = "stopped"
        try:
            if deregister and self._may_be_registered:
                self._deregister()
        finally:
            self._channel.close()

    # ------------------------------------------------------------------ calls

    def _call(self, method, request, timeout, during_stop=False):
        if self._stop.is_set() and not during_stop:
            raise _Stopped()
        future = method.future(request, timeout=timeout, metadata=self.metadata)
        with self._lock:
            self._inflight = future
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise _Stopped()
        finally:
            with self._lock:
                self._inflight = None

    def _deregister(self):
        try:
            res = self._call(self._stub.GetEngine, registry_pb2.GetEngineRequest(engine_id=self.engine_id), 1.0, True)
            if res.engine.endpoint and res.engine.endpoint != self.endpoint:
                self.log.info("not deregistering: the registration now points at another instance", registered_endpoint=res.engine.endpoint)
                return
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                self.log.info("not deregistering: the registry does not hold this engine")
                return
            # Unknown: deregister anyway (that is what stopping asks for).
        try:
            self._call(self._stub.DeregisterEngine, registry_pb2.DeregisterEngineRequest(engine_id=self.engine_id), 2.0, True)
            self.log.info("deregistered")
        except grpc.RpcError as e:
            self.log.warn("deregistration failed (ignored)", code=e.code().name, reason=e.details())

    # ------------------------------------------------------------------ loop

    def _run(self):
        try:
            if not self._register("initial"):
                return
            while not self._stop.wait(self.heartbeat_s):
                if not self._heartbeat():
                    return
        except _Stopped:
            return
        except Exception as e:  # a bug: say so instead of dying silently
            self.log.error("registration loop crashed", error=repr(e))

    def _backoff(self, attempt):
        base = min(self.retry_max_s, self.retry_initial_s * (2 ** min(attempt, 30)))
        return base / 2 + random.random() * base / 2  # "equal jitter"

    def _register(self, why):
        """Registers, retrying transient failures. False when refused for good or stopped."""
        self.state = "registering"
        request = registry_pb2.RegisterEngineRequest(
            engine_id=self.engine_id,
            owner=self.owner,
            endpoint=self.endpoint,
            allow_same_owner_refresh=True,
            protocol_versions=self.protocol_versions,
        )
        attempt = 0
        while not self._stop.is_set():
            before = self._may_be_registered
            # From here on the registry may hold this instance (even if the answer gets lost).
            self._may_be_registered = True
            try:
                res = self._call(self._stub.RegisterEngine, request, REGISTER_TIMEOUT_S)
                if res.ok:
                    self._on_registered(res, why, attempt)
                    return True
                refusal = registry_pb2.Refusal.Name(res.refusal)
                transient = res.refusal == registry_pb2.REFUSAL_UNREACHABLE
                fields = dict(refusal=refusal, reason=res.message, existing_owner=res.existing_owner or None)
                problem = "the registry refused the engine"
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    self._may_be_registered = before  # the request never reached a registry
                transient = e.code() in TRANSIENT
                fields = dict(code=e.code().name, reason=e.details())
                problem = "registering failed"
            if self._stop.is_set():
                return False
            if not transient:
                self._may_be_registered = False
                self.state = "failed"
                self.log.error(problem + "; not retrying (the engine keeps serving)", **fields)
                return False
            delay = self._backoff(attempt)
            level = "warn" if attempt % 10 == 0 else "debug"
            self.log.log(level, problem + "; retrying", attempt=attempt + 1, retry_in_ms=int(delay * 1000), **fields)
            attempt += 1
            if self._stop.wait(delay):
                return False
        return False

    def _on_registered(self, res, why, attempt):
        self.state = "registered"
        self.registrations += 1
        self._registry_down = False
        self._heartbeat_problem = ""
        self._held_by = ""
        self.log.info(
            "registered" if why == "initial" else "registered again",
            owner=self.owner,
            protocol_version=res.protocol_version,
            attempts=attempt + 1,
            why=why,
        )
        self.registered.set()

    def _heartbeat(self):
        """Does the registry still hold this engine? Registers again only when it lost it (NOT_FOUND),
        not when another instance holds the id. False when heartbeating should stop."""
        try:
            res = self._call(
                self._stub.GetEngine,
                registry_pb2.GetEngineRequest(engine_id=self.engine_id),
                min(5.0, max(1.0, self.heartbeat_s)),
            )
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.NOT_FOUND:
                if self._held_by:
                    why = "the other instance at %s gave up the registration of %s; registering again" % (self._held_by, self.engine_id)
                elif self._registry_down:
                    why = "the registry is back without this engine (it restarted); registering again"
                else:
                    why = "the registry no longer has this engine; registering again"
                self.log.warn(why)
                self._registry_down = False
                self._held_by = ""
                return self._register("lost")
            if code in TRANSIENT:
                if not self._registry_down:
                    self.log.warn("registry unreachable; will check the registration again when it is back", code=code.name)
                self._registry_down = True
            elif code == grpc.StatusCode.UNIMPLEMENTED:
                self.log.warn("the registry does not implement GetEngine; registration heartbeat disabled")
                return False
            else:
                problem = "%s: %s" % (code.name, e.details())
                if problem != self._heartbeat_problem:
                    self.log.warn("registration heartbeat failed", reason=problem)
                self._heartbeat_problem = problem
            return True
        if not res.HasField("engine"):
            problem = "GetEngine answered without the engine"
            if problem != self._heartbeat_problem:
                self.log.warn("registration heartbeat failed", reason=problem)
            self._heartbeat_problem = problem
            return True
        if self._registry_down:
            self.log.info("registry reachable again")
        self._registry_down = False
        self._heartbeat_problem = ""
        if res.engine.endpoint != self.endpoint:
            if res.engine.endpoint != self._held_by:
                self.log.warn(
                    "another instance now holds the registration of %s at %s; not re-registering" % (self.engine_id, res.engine.endpoint),
                    registered_endpoint=res.engine.endpoint,
                )
                self._held_by = res.engine.endpoint
            return True
        if self._held_by:
            self.log.info("the registry points at this instance again", previous_endpoint=self._held_by)
            self._held_by = ""
        quarantine = ""
        if res.engine.HasField("quarantine"):
            quarantine = "%s: %s" % (res.engine.quarantine.operation, res.engine.quarantine.reason)
        if quarantine != self._last_quarantine:
            if quarantine:
                self.log.warn("the registry has quarantined this engine", operation=res.engine.quarantine.operation, reason=res.engine.quarantine.reason)
            else:
                self.log.info("the registry released this engine from quarantine")
            self._last_quarantine = quarantine
        return True
