"""A ready-made `compact` for engines that do not own compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from contextd.v1 import engine_pb2, types_pb2

from .errors import EngineError, HostCallError

if TYPE_CHECKING:
    from .call_context import CallContext

__all__ = ["delegate_compaction_to_host"]


def delegate_compaction_to_host(
    request: engine_pb2.ContextEngineServiceCompactRequest, ctx: CallContext
) -> engine_pb2.ContextEngineServiceCompactResponse:
    """Runs the host's native compaction through HostService.DelegateCompaction with the Compact
    request's parameters and answers with its result. The host commits the compaction entry under
    this engine's id.

        serve_engine(Engine(id="mine", name="Mine", assemble=assemble, compact=delegate_compaction_to_host))

    With it as `compact`, the Engine declares `host-compaction` by itself.
    """
    if ctx.host is None:
        raise EngineError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "Compact carried no HostContext, so the engine cannot delegate compaction to the host",
        )
    session = request.session.session_id
    ctx.log.info(
        "compacting: delegating to the host",
        extra={
            "session": session,
            "budget": request.token_budget,
            "force": request.force,
            "target": types_pb2.CompactionTarget.Name(request.compaction_target),
        },
    )
    try:
        res = ctx.host.delegate_compaction(
            session=request.session,
            token_budget=request.token_budget,
            force=request.force,
            current_token_count=request.current_token_count,
            compaction_target=request.compaction_target,
            custom_instructions=request.custom_instructions,
        )
    except HostCallError as err:
        level = "info" if err.code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED) else "warning"
        getattr(ctx.log, level)("delegated compaction failed", extra={"session": session, "code": err.code.name, "reason": err.details})
        raise
    ctx.log.info(
        "delegated compaction answered",
        extra={
            "session": session,
            "ok": res.ok,
            "compacted": res.compacted,
            "reason": res.reason,
            "tokens_before": res.result.tokens_before if res.compacted else None,
            "tokens_after": res.result.tokens_after if res.compacted else None,
        },
    )
    return engine_pb2.ContextEngineServiceCompactResponse(
        ok=res.ok,
        compacted=res.compacted,
        reason=res.reason,
        result=res.result if res.HasField("result") else None,
    )
