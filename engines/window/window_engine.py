"""The window engine's gRPC services: contextd.v1.ContextEngineService and grpc.health.v1.Health."""

import threading

import grpc

from assembly import select_window
from contextd.v1 import engine_pb2, engine_pb2_grpc, types_pb2
from health.v1 import health_pb2, health_pb2_grpc
from host_client import HostCallError

ENGINE_ID = "window"
ENGINE_NAME = "Sliding window"
ENGINE_VERSION = "1.0.0"
ENGINE_SERVICE = "contextd.v1.ContextEngineService"
PROTOCOL_VERSIONS = [1]


def engine_info():
    return engine_pb2.EngineInfo(
        id=ENGINE_ID,
        name=ENGINE_NAME,
        version=ENGINE_VERSION,
        owns_compaction=False,
        turn_maintenance_mode=engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND,
        capabilities=engine_pb2.EngineCapabilities(ingest_batch=True),
        host_requirements=["host-compaction"],
        protocol_versions=PROTOCOL_VERSIONS,
    )


def _cancelled(context):
    remaining = context.time_remaining()
    return not context.is_active() or (remaining is not None and remaining <= 0)


class WindowEngine(engine_pb2_grpc.ContextEngineServiceServicer):
    """Assemble: the newest whole turns that fit, after the host's compaction summary (assembly.py).
    Compact: delegated to the host. Ingest: accepted (the host stores the transcript)."""

    def __init__(self, log, host_client, max_turns=0):
        self.log = log
        self.host = host_client
        self.max_turns = max_turns

    def GetInfo(self, request, context):
        return engine_pb2.GetInfoResponse(info=engine_info())

    def Assemble(self, request, context):
        if _cancelled(context):
            context.abort(grpc.StatusCode.CANCELLED, "Assemble was cancelled before it started")
        if request.HasField("token_budget"):
            budget = request.token_budget
        else:
            # "Unset means the engine chooses": the runtime's prompt budget when the host knows it, else everything.
            budget = request.runtime_settings.limits.prompt_token_budget or None
        window = select_window(request.messages, budget, self.max_turns)
        authority = (
            types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW if window.overflow else types_pb2.PROMPT_AUTHORITY_ASSEMBLED
        )
        fields = dict(
            session=request.session.session_id,
            budget=budget,
            view_messages=len(request.messages),
            kept_messages=len(window.messages),
            whole_turns=window.whole_turns,
            partial_turn=window.partial_turn,
            summary=window.summary_kept,
            tokens=window.estimated_tokens,
        )
        if window.overflow:
            self.log.warn("the compaction summary and the latest user message alone exceed the budget: answering PREASSEMBLY_MAY_OVERFLOW", **fields)
        else:
            self.log.debug("assembled", **fields)
        return engine_pb2.ContextEngineServiceAssembleResponse(
            messages=window.messages,
            estimated_tokens=window.estimated_tokens,
            prompt_authority=authority,
        )

    def Compact(self, request, context):
        session = request.session.session_id
        self.log.info(
            "compacting: delegating to the host",
            session=session,
            budget=request.token_budget,
            force=request.force,
            target=types_pb2.CompactionTarget.Name(request.compaction_target),
        )
        try:
            res = self.host.delegate_compaction(request, context)
        except HostCallError as e:
            level = "info" if e.code == grpc.StatusCode.CANCELLED else "warn"
            self.log.log(level, "delegated compaction failed", session=session, code=e.code.name, reason=e.details)
            context.abort(e.code, e.details)
        self.log.info(
            "delegated compaction answered",
            session=session,
            ok=res.ok,
            compacted=res.compacted,
            reason=res.reason,
            tokens_before=res.result.tokens_before if res.compacted else None,
            tokens_after=res.result.tokens_after if res.compacted else None,
        )
        response = engine_pb2.ContextEngineServiceCompactResponse(ok=res.ok, compacted=res.compacted, reason=res.reason)
        if res.HasField("result"):
            response.result.CopyFrom(res.result)
        return response

    def Ingest(self, request, context):
        return engine_pb2.IngestResponse(ingested=True)

    def IngestBatch(self, request, context):
        return engine_pb2.IngestBatchResponse(ingested_count=len(request.messages))

    # Optional RPCs the capabilities do not advertise, so a correct host does not call them. The
    # window engine keeps no per-session state, so each is truthfully a no-op if one does.

    def Bootstrap(self, request, context):
        return engine_pb2.BootstrapResponse(bootstrapped=False, reason="the window engine keeps no per-session state")

    def AfterTurn(self, request, context):
        return engine_pb2.ContextEngineServiceAfterTurnResponse()

    def Maintain(self, request, context):
        return engine_pb2.ContextEngineServiceMaintainResponse(changed=False, reason="the window engine keeps no per-session state")

    def PrepareSubagentSpawn(self, request, context):
        return engine_pb2.ContextEngineServicePrepareSubagentSpawnResponse(rollback_handle="")

    def RollbackSubagentSpawn(self, request, context):
        return engine_pb2.ContextEngineServiceRollbackSubagentSpawnResponse()

    def OnSubagentEnded(self, request, context):
        return engine_pb2.OnSubagentEndedResponse()

    def Dispose(self, request, context):
        return engine_pb2.DisposeResponse()


class Health(health_pb2_grpc.HealthServicer):
    """grpc.health.v1 for the whole server ("") and the engine service: Check, Watch and List."""

    SERVING = health_pb2.HealthCheckResponse.SERVING
    NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
    SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
    # How often a Watch stream checks that its caller is still there.
    WATCH_POLL_S = 1.0

    def __init__(self):
        self._cond = threading.Condition()
        self._status = {"": self.SERVING, ENGINE_SERVICE: self.SERVING}
        self._version = 0

    def set_all(self, status):
        with self._cond:
            for name in self._status:
                self._status[name] = status
            self._version += 1
            self._cond.notify_all()

    def Check(self, request, context):
        with self._cond:
            status = self._status.get(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service %r" % request.service)
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(self, request, context):
        last = None
        while context.is_active():
            with self._cond:
                status = self._status.get(request.service, self.SERVICE_UNKNOWN)
                version = self._version
            if status != last:
                yield health_pb2.HealthCheckResponse(status=status)
                last = status
            with self._cond:
                if self._version == version:
                    self._cond.wait(self.WATCH_POLL_S)

    def List(self, request, context):
        with self._cond:
            statuses = dict(self._status)
        res = health_pb2.HealthListResponse()
        for name, status in statuses.items():
            res.statuses[name].status = status
        return res
