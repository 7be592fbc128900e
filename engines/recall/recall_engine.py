"""The recall engine on the engine SDK: Ingest/IngestBatch index every message (index.py),
Bootstrap and lazy gap fills read the host's transcript (sync.py), Assemble is the view in order
with, before each turn's user message, the earlier messages recalled for that turn's request
(selection.py, fts_query.py), and Compact is the host's own (delegate_compaction_to_host): the index
keeps everything, so the host's summary plus recall covers what a cut drops.

The answer is laid out for providers' prompt caches (selection.py): a turn's block is chosen once
(stored in the index, `RecallIndex.set_block`) and kept where it was shown, the system prompt
addition never changes, and when the next turn's block would not fit the engine has the host
compact the view at once (`compact_ahead`), so that the prompt's prefix is rewritten once per
compaction and nowhere else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextd.engine import CallContext, Engine, HostCallError, delegate_compaction_to_host, keep_messages
from contextd.pinned import split_pinned
from contextd.turns import pair_tools, total_tokens
from contextd.v1 import engine_pb2, types_pb2
from contextd.messages import text_of
from fts_query import fts_query
from index import RecallIndex, RecallUnit
from selection import BLOCK_SHARE, STEP_SHARE, UPCOMING, Assembly, Layout, choose_block, complete, plan_layout
from sync import bootstrap, fill_gaps

ENGINE_ID = "recall"

#: Matching messages asked of the index per recalled block (each becomes at most one unit).
RECALL_CANDIDATES = 64
#: Units recalled when the call has no budget at all (the whole view is kept then).
UNBOUNDED_MAX_UNITS = 8
#: Metadata a recalled message carries in the answer: the id of the user message it was recalled for.
RECALLED_FOR = "recall.recalled_for"

#: system_prompt_addition, the same on every answer: a prompt cache serves only what follows an
#: unchanged addition (the runtime puts it before its system prompt).
RECALL_NOTE = (
    "Some earlier messages of this conversation may be shown again as recalled context: they were found relevant to a "
    "user request and appear as a block just before that request, out of conversation order."
)


def _marked(messages: Sequence[types_pb2.Message], anchor: str) -> list[types_pb2.Message]:
    """Copies of a block's messages marked as recalled for the turn of `anchor`."""
    out = []
    for m in messages:
        copy = types_pb2.Message()
        copy.CopyFrom(m)
        copy.metadata[RECALLED_FOR] = anchor
        out.append(copy)
    return out


def recall_engine(index: RecallIndex, block_share: float = BLOCK_SHARE, step_share: float = STEP_SHARE) -> Engine:
    """The Engine over `index` (the caller opens and closes it)."""

    def stored_block(session_id: str, entry_ids: Sequence[str], view_by_id: Mapping[str, types_pb2.Message]) -> list[types_pb2.Message]:
        """A stored block's messages: the view's copy where it holds one, else the index's; repaired
        (pair_tools) in case a rewrite or a hidden entry broke a unit."""
        indexed = index.messages(session_id, [i for i in entry_ids if i not in view_by_id])
        found = [view_by_id.get(i) or indexed.get(i) for i in entry_ids]
        return pair_tools([m for m in found if m is not None])

    def compact_ahead(
        request: engine_pb2.ContextEngineServiceAssembleRequest, budget: int, assembly: Assembly, layout: Layout, older: int, ctx: CallContext
    ) -> None:
        """Has the host compact the view now (HostService.DelegateCompaction, the host's own
        compaction at this budget) when what this answer leaves of the budget is less than a block's
        room: the next call then starts from the compacted view. One rewrite of the prompt's prefix
        (the new summary), where waiting would cost two: a step of the layout, then the host's own
        compaction once the view outgrows the budget. `older`: the tokens of the view before its
        newest turn; when they could not free a block's room, compacting would not help (and would
        only rewrite the prefix again on every call)."""
        need = block_share * (budget - total_tokens(layout.pinned))
        if budget - assembly.estimated_tokens >= need or older < need:
            return
        fields = {"session": request.session.session_id, "budget": budget, "tokens": assembly.estimated_tokens, "headroom": budget - assembly.estimated_tokens}
        try:
            res = ctx.host.delegate_compaction(session=request.session, token_budget=budget, force=True)
        except HostCallError as err:
            ctx.raise_if_cancelled()
            ctx.log.warning("could not compact ahead; the layout will step instead", extra={**fields, "code": err.code.name, "reason": err.details})
            return
        ctx.log.info(
            "compacted ahead of the next turn",
            extra={**fields, "compacted": res.compacted, "reason": res.reason, "tokens_after": res.result.tokens_after if res.compacted else None},
        )

    def assemble(request: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
        session = request.session
        sid = session.session_id
        if request.HasField("token_budget"):
            budget = request.token_budget
        else:
            # "Unset means the engine chooses": the runtime's prompt budget when the host knows it, else everything.
            budget = request.runtime_settings.limits.prompt_token_budget or None
        view = list(request.messages)
        query = fts_query(request.prompt)
        # Messages the index never saw (the engine was down, or quarantined): read them in first.
        fill_gaps(index, session, view, ctx)
        view_by_id = {m.id: m for m in view if m.id}
        _, rest = split_pinned(view)
        latest = next((m for m in reversed(rest) if m.role == types_pb2.ROLE_USER), None)
        newest = latest.id if latest is not None else ""
        # A prompt that is not the latest user message's text is the message the runtime is about
        # to send (selection.UPCOMING): its block goes after the newest turn.
        upcoming = query is not None and request.prompt != (text_of(latest) if latest is not None else "")
        # Blocks live as long as the view they were chosen in: a compaction rewrites the prompt from
        # its summary on anyway, and starting over keeps the compacted view's blocks from piling up.
        epoch = rest[0].id if rest else ""
        stored = index.blocks(sid, [m.id for m in rest if m.role == types_pb2.ROLE_USER and m.id] + [UPCOMING], epoch)
        older_blocks = {
            a: _marked(stored_block(sid, ids, view_by_id), a) for a, (_, ids) in stored.items() if a != UPCOMING and (a != newest or upcoming) and ids
        }
        # The block of this very request, when one was chosen already: kept as it is. A block chosen
        # for an upcoming message becomes that message's own once it is in the view.
        key = UPCOMING if upcoming else newest
        current = stored.get(key)
        pending = stored.get(UPCOMING)
        if current is None and not upcoming and pending is not None and pending[0] == request.prompt:
            current = pending
        block = stored_block(sid, current[1], view_by_id) if current and current[0] == request.prompt else None
        kept = block is not None and current is stored.get(key)  # stored under this key already

        def candidates() -> list[RecallUnit]:
            """The index's best matches for the prompt, before the newest turn (for an upcoming
            message: anywhere), as whole units."""
            if query is None:
                return []
            bound = None
            if not upcoming:
                bound = index.ords(sid, [newest]).get(newest)
                if bound is None:
                    ctx.log.warning("the latest user message is not in the index: assembling without recall", extra={"session": sid})
                    return []
            return index.recall_units(sid, query, bound, RECALL_CANDIDATES, check=ctx.raise_if_cancelled)

        units = candidates() if block is None else []
        # Room is set aside for a block only when something the answer will not show matches: a
        # message the view lacks, or any match when the view does not fit (part of it will go).
        over = budget is not None and total_tokens(view) + sum(total_tokens(b) for b in older_blocks.values()) > budget
        want = bool(block) or any(over or i not in view_by_id for u in units for i in u.ids)
        layout = plan_layout(view, budget, older_blocks, total_tokens(block or ()), upcoming, want, block_share, step_share)
        if block is not None and (not layout.anchor or total_tokens(block) > layout.room or any(m.id in layout.shown_ids() for m in block)):
            block, kept = None, False  # it no longer fits, or the view changed under it: chosen again
            units = candidates()
        if block is None and layout.anchor:
            max_units = UNBOUNDED_MAX_UNITS if budget is None else None
            block = choose_block(units, layout.room, layout.shown_ids(), view_by_id, max_units) if layout.room > 0 else []
        if layout.anchor and not kept:
            index.set_block(sid, layout.anchor, epoch, request.prompt, [m.id for m in block or []])
        ctx.raise_if_cancelled()
        assembly = complete(layout, _marked(block or [], layout.anchor))
        if budget is not None and not assembly.overflow and ctx.host is not None:
            compact_ahead(request, budget, assembly, layout, total_tokens(rest) - total_tokens(layout.newest), ctx)
        fields = {
            "session": sid,
            "budget": budget,
            "view_messages": len(view),
            "messages": len(assembly.messages),
            "recalled": len(assembly.block),
            "recalled_shown": len(assembly.recalled),
            "recalled_before_cut": sum(1 for m in assembly.block if m.id not in view_by_id),
            "candidates": len(units),
            "whole_turns": assembly.whole_turns,
            "dropped_turns": assembly.dropped_turns,
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
        return {
            # View messages by id where the shape allows (nothing recalled); with recalled blocks
            # keep_messages answers the echo form by itself.
            **keep_messages(request, assembly.messages),
            "estimated_tokens": assembly.estimated_tokens,
            "prompt_authority": (
                types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW if assembly.overflow else types_pb2.PROMPT_AUTHORITY_ASSEMBLED
            ),
            "system_prompt_addition": RECALL_NOTE,
        }

    def ingest(request: engine_pb2.IngestRequest, ctx: CallContext) -> dict:
        index.ingest(request.session.session_id, [request.message])
        return {"ingested": True}

    def ingest_batch(request: engine_pb2.IngestBatchRequest, ctx: CallContext) -> dict:
        index.ingest(request.session.session_id, request.messages)
        return {"ingested_count": len(request.messages)}

    def bootstrap_session(request: engine_pb2.BootstrapRequest, ctx: CallContext) -> dict:
        return bootstrap(index, request.session, ctx)

    def forget_session(request: engine_pb2.ForgetSessionRequest, ctx: CallContext) -> dict:
        purged = index.forget(request.session.session_id)
        ctx.log.info("forgot a deleted session", extra={"session": request.session.session_id, "purged": purged})
        return {"purged": purged}

    return Engine(
        id=ENGINE_ID,
        name="Recall (fresh turns plus BM25-recalled history)",
        version="1.0.0",
        assemble=assemble,
        compact=delegate_compaction_to_host,
        ingest=ingest,
        ingest_batch=ingest_batch,
        bootstrap=bootstrap_session,
        forget_session=forget_session,
    )
