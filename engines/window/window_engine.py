"""The window engine on the engine SDK: Assemble is the newest whole turns that fit after the
host's compaction summary (assembly.py); Compact is the host's own (delegate_compaction_to_host);
the SDK does the serving, registration, health, deadlines and logging."""

from __future__ import annotations

from assembly import select_window
from contextd.engine import CallContext, Engine, delegate_compaction_to_host, keep_messages
from contextd.v1 import engine_pb2, types_pb2

ENGINE_ID = "window"


def window_engine(max_turns: int = 0) -> Engine:
    """The Engine, keeping at most `max_turns` turns (0: as many as fit the budget)."""

    def assemble(request: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
        if request.HasField("token_budget"):
            budget = request.token_budget
        else:
            # "Unset means the engine chooses": the runtime's prompt budget when the host knows it, else everything.
            budget = request.runtime_settings.limits.prompt_token_budget or None
        window = select_window(request.messages, budget, max_turns)
        fields = {
            "session": request.session.session_id,
            "budget": budget,
            "view_messages": len(request.messages),
            "kept_messages": len(window.messages),
            "whole_turns": window.whole_turns,
            "partial_turn": window.partial_turn,
            "summary": window.summary_kept,
            "tokens": window.estimated_tokens,
        }
        if window.overflow:
            ctx.log.warning(
                "the compaction summary and the latest user message alone exceed the budget: answering PREASSEMBLY_MAY_OVERFLOW",
                extra=fields,
            )
        else:
            ctx.log.debug("assembled", extra=fields)
        # The window is messages of the view: answered by their ids (kept_entry_ids), not sent back.
        return {
            **keep_messages(request, window.messages),
            "estimated_tokens": window.estimated_tokens,
            "prompt_authority": (
                types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW if window.overflow else types_pb2.PROMPT_AUTHORITY_ASSEMBLED
            ),
        }

    def ingest_batch(request: engine_pb2.IngestBatchRequest, ctx: CallContext) -> dict:
        # The host stores the transcript; the window keeps nothing of its own.
        return {"ingested_count": len(request.messages)}

    return Engine(
        id=ENGINE_ID,
        name="Sliding window",
        version="1.0.0",
        assemble=assemble,
        compact=delegate_compaction_to_host,
        ingest_batch=ingest_batch,
    )
