"""The recall engine on the engine SDK: Ingest/IngestBatch index every message (index.py),
Bootstrap and lazy gap fills read the host's transcript (sync.py), Assemble is the fresh turns plus
the earlier messages most relevant to the prompt (selection.py, fts_query.py), and Compact is the
host's own (delegate_compaction_to_host): the index keeps everything, so the host's summary plus
recall covers what a cut drops."""

from __future__ import annotations

from contextd.engine import CallContext, Engine, delegate_compaction_to_host, keep_messages
from contextd.v1 import engine_pb2, types_pb2
from fts_query import fts_query
from index import RecallIndex
from selection import FRESH_SHARE, complete, plan_fresh
from sync import bootstrap, fill_gaps

ENGINE_ID = "recall"

#: Matching messages asked of the index per Assemble (each becomes at most one unit).
RECALL_CANDIDATES = 64
#: Units recalled when the call has no budget at all (the whole view is kept then).
UNBOUNDED_MAX_UNITS = 8


def recall_note(count: int) -> str:
    """system_prompt_addition when messages were recalled: what they are and where they are."""
    what = "1 earlier message was" if count == 1 else f"{count} earlier messages were"
    return f"{what} recalled for relevance to the current request; they appear in conversation order before the recent turns."


def recall_engine(index: RecallIndex, fresh_share: float = FRESH_SHARE) -> Engine:
    """The Engine over `index` (the caller opens and closes it)."""

    def assemble(request: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
        session = request.session
        if request.HasField("token_budget"):
            budget = request.token_budget
        else:
            # "Unset means the engine chooses": the runtime's prompt budget when the host knows it, else everything.
            budget = request.runtime_settings.limits.prompt_token_budget or None
        view = list(request.messages)
        query = fts_query(request.prompt)
        # Messages the index never saw (the engine was down, or quarantined): read them in first.
        fill_gaps(index, session, view, ctx)
        plan = plan_fresh(view, budget, fresh_share)
        units = []
        if query is not None and not plan.overflow and plan.remaining > 0 and plan.tail:
            ords = index.ords(session.session_id, [m.id for m in plan.tail])
            # Recall only what lies before the fresh tail, so that "recalled, then tail" is conversation order.
            bound = ords.get(plan.tail[0].id, min(ords.values(), default=None))
            if bound is None:
                ctx.log.warning("the fresh turns are not in the index: assembling without recall", extra={"session": session.session_id})
            else:
                units = index.recall_units(session.session_id, query, bound, RECALL_CANDIDATES, check=ctx.raise_if_cancelled)
        ctx.raise_if_cancelled()
        view_by_id = {m.id: m for m in view if m.id}
        assembly = complete(plan, units, view_by_id, max_units=UNBOUNDED_MAX_UNITS if budget is None else None)
        recalled_from_index = sum(1 for m in assembly.recalled if m.id not in view_by_id)
        fields = {
            "session": session.session_id,
            "budget": budget,
            "view_messages": len(view),
            "messages": len(assembly.messages),
            "recalled": len(assembly.recalled),
            "recalled_before_cut": recalled_from_index,
            "candidates": len(units),
            "whole_turns": assembly.whole_turns,
            "partial_turn": assembly.partial_turn,
            "summary": assembly.summary_kept,
            "tokens": assembly.estimated_tokens,
            "prompt": query is not None,
        }
        if assembly.overflow:
            ctx.log.warning(
                "the pinned messages and the latest user message alone exceed the budget: answering PREASSEMBLY_MAY_OVERFLOW",
                extra=fields,
            )
        else:
            ctx.log.debug("assembled", extra=fields)
        answer = {
            # View messages by id where the shape allows; recalled messages from before the cut
            # interleaved after pinned ones make keep_messages answer the echo form by itself.
            **keep_messages(request, assembly.messages),
            "estimated_tokens": assembly.estimated_tokens,
            "prompt_authority": (
                types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW if assembly.overflow else types_pb2.PROMPT_AUTHORITY_ASSEMBLED
            ),
        }
        if assembly.recalled:
            answer["system_prompt_addition"] = recall_note(len(assembly.recalled))
        return answer

    def ingest(request: engine_pb2.IngestRequest, ctx: CallContext) -> dict:
        index.ingest(request.session.session_id, [request.message])
        return {"ingested": True}

    def ingest_batch(request: engine_pb2.IngestBatchRequest, ctx: CallContext) -> dict:
        index.ingest(request.session.session_id, request.messages)
        return {"ingested_count": len(request.messages)}

    def bootstrap_session(request: engine_pb2.BootstrapRequest, ctx: CallContext) -> dict:
        return bootstrap(index, request.session, ctx)

    return Engine(
        id=ENGINE_ID,
        name="Recall (fresh turns plus BM25-recalled history)",
        version="1.0.0",
        assemble=assemble,
        compact=delegate_compaction_to_host,
        ingest=ingest,
        ingest_batch=ingest_batch,
        bootstrap=bootstrap_session,
    )
