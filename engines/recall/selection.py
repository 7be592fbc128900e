"""What the model sees: the budgeted selection of `recall`. Pure (no SQLite, no gRPC).

Two steps, because the second needs the index and the first decides what to ask it for:

1. `plan_fresh(view, budget)`: the pinned messages (system messages and the host's compaction
   summary, `contextd.pinned.split_pinned`), the latest user message, and the freshest whole turns
   of the view that fit FRESH_SHARE of what the pinned messages leave of the budget. The newest
   turn is kept whole whenever it fits the whole budget; when it does not, it is cut to the latest
   user message plus the longest tail that fits and cuts no tool pair
   (contextd.turns.longest_fitting_tail).
   When the pinned messages and the latest user message alone do not fit, that is the answer,
   flagged `overflow`. Turns are repaired first (contextd.turns.paired_turns: no result without
   its call, no call without its result); when no turn is left (e.g. the view is only tool results
   whose calls were compacted away), the plan is that of an empty history: the pinned messages.
2. `complete(plan, units)`: the recalled units (index.RecallUnit, best first: a message, or a tool
   call with all its results) that fit what is left, each whole or not at all; then whatever is
   still left goes to older whole turns of the view, newest first, contiguous with the fresh tail
   (as a window engine would), absorbing recalled messages they contain; the first turn that does
   not fit gives the longest tail of it that does and cuts no tool pair, so the budget is used
   even when turns are large. A recalled unit that reaches into what the tail grew to leaves the
   recalled section whole (the tail keeps what it holds of it): a unit is never split between the
   two. Without units (no prompt, nothing matched) step 2 is a sliding window over the budget.

The answer is in conversation order: pinned, recalled (by index order), then the tail. Recalled
messages always lie before the tail (the engine asks the index only for messages before the fresh
turns, and step 2 drops units reaching into the turns it adds), so that order is the
conversation's. Recalled units are paired as the view is (index.py, tool_units.py) and repaired
again once the view's copies replace the indexed ones (pair_tools): no call without its result. Tokens are the host's: the view's `token_count`s, and for a
message recalled from the index the count it had when ingested. Never over the budget, except for
the flagged overflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contextd.pinned import is_system, split_pinned
from contextd.turns import longest_fitting_tail, pair_tools, paired_turns, total_tokens
from contextd.v1 import types_pb2

Message = types_pb2.Message

#: The share of the budget (after the pinned messages) that the freshest whole turns may take
#: before recall; the rest goes to recalled messages, then to more fresh turns. See README.md.
FRESH_SHARE = 0.55


@dataclass
class FreshPlan:
    pinned: list[Message]
    tail: list[Message]  # the fresh turns, view order; starts at a user message (or the leading fragment)
    older_turns: list[list[Message]]  # the view's turns before the tail, oldest first
    used: int  # tokens of pinned + tail
    limit: float  # the budget (inf: none)
    overflow: bool
    partial_turn: bool  # the newest turn was cut
    whole_turns: int
    summary_kept: bool
    positions: dict[str, int] = field(default_factory=dict)  # view message id -> its index in the view

    @property
    def remaining(self) -> float:
        return self.limit - self.used


@dataclass
class Assembly:
    messages: list[Message]  # what the model sees, in order
    estimated_tokens: int
    overflow: bool
    recalled: list[Message] = field(default_factory=list)  # the recalled section, in order
    whole_turns: int = 0
    partial_turn: bool = False
    summary_kept: bool = False


def is_summary(message: Message) -> bool:
    """The host's compaction summary (pinned, and not a system message)."""
    return not is_system(message) and message.metadata.get("contextd.kind") == "compaction_summary"


def plan_fresh(view: Sequence[Message], budget: int | None, share: float = FRESH_SHARE) -> FreshPlan:
    """Step 1 (see the module doc). `budget` None: no limit."""
    head, rest = split_pinned(view)
    base = total_tokens(head)
    limit = math.inf if budget is None else float(budget)
    summary_kept = any(is_summary(m) for m in head)
    positions = {m.id: i for i, m in enumerate(view) if m.id}

    def plan(tail: list[Message], older: list[list[Message]], used: int, overflow: bool, partial: bool, whole: int) -> FreshPlan:
        return FreshPlan(head, tail, older, used, limit, overflow, partial, whole, summary_kept, positions)

    turns = paired_turns(rest)  # without the turns the tool-pair repair leaves empty
    if not turns:
        return plan([], [], base, base > limit, False, 0)
    newest = turns[-1]
    latest_user = [newest[0]] if newest[0].role == types_pb2.ROLE_USER else []
    body = newest[len(latest_user) :]
    required = base + total_tokens(latest_user)
    if required > limit:
        return plan(latest_user, [], required, True, bool(body), 0)

    if base + total_tokens(newest) > limit:
        tail = latest_user + longest_fitting_tail(body, int(limit - required))
        return plan(tail, turns[:-1], required + total_tokens(tail) - total_tokens(latest_user), False, True, 0)

    fresh_limit = base + share * (limit - base)
    used = base + total_tokens(newest)
    start = len(turns) - 1
    while start > 0:
        t = total_tokens(turns[start - 1])
        if used + t > fresh_limit:
            break
        used += t
        start -= 1
    tail = [m for turn in turns[start:] for m in turn]
    return plan(tail, turns[:start], used, False, False, len(turns) - start)


def complete(plan: FreshPlan, units: Sequence, view_by_id: Mapping[str, Message] | None = None, max_units: int | None = None) -> Assembly:
    """Step 2 (see the module doc). `units`: index.RecallUnit-like (messages, ords, ids), best
    first. A recalled message that is also in the view is answered as the view holds it (the
    host's current copy). `max_units` caps the recalled units (for a call without a budget)."""
    if plan.overflow:
        return Assembly(plan.pinned + plan.tail, plan.used, True, [], 0, plan.partial_turn, plan.summary_kept)
    view_by_id = view_by_id or {}
    remaining = plan.remaining
    taken = {m.id for m in plan.pinned if m.id} | {m.id for m in plan.tail if m.id}
    recalled: dict[str, tuple[int, Message]] = {}  # id -> (ord, message)
    chosen: list[list[str]] = []  # the ids of each recalled unit
    for unit in units:
        if max_units is not None and len(chosen) >= max_units:
            break
        if remaining <= 0:
            break
        if any(i in taken for i in unit.ids):
            continue
        ord_of = dict(zip((m.id for m in unit.messages), unit.ords))
        # The view's copy may differ from the indexed one (a rewrite, or a call the index's unit
        # stripped as unanswered): repaired again, so that no call comes without its result.
        messages = pair_tools([view_by_id.get(m.id, m) for m in unit.messages])
        cost = total_tokens(messages)
        if not messages or cost > remaining:
            continue
        remaining -= cost
        taken.update(unit.ids)
        chosen.append([m.id for m in messages])
        for m in messages:
            recalled[m.id] = (ord_of[m.id], m)

    tail = list(plan.tail)
    whole = plan.whole_turns
    if not plan.partial_turn:
        # What recall left goes to more fresh turns, contiguous with the tail.
        for turn in reversed(plan.older_turns):
            cost = total_tokens(m for m in turn if m.id not in recalled)
            if cost > remaining:
                # The first turn that does not fit gives its longest tail that does (cut at a
                # tool-pair boundary, never starting with a tool result), then the tail is complete.
                # Counted whole, recalled messages in it included: an upper bound.
                part = longest_fitting_tail(turn, int(remaining))
                for m in part:
                    recalled.pop(m.id, None)
                tail = part + tail
                break
            remaining -= cost
            for m in turn:
                recalled.pop(m.id, None)
            tail = turn + tail
            whole += 1

    # A unit reaching into the view at or after the tail's first message would be split from the
    # part of it the tail holds, or shown out of order (a call from before the view's start whose
    # result the view's repair dropped): its messages leave the recalled section (their tokens
    # stay unused). The index pairs within a turn as the view does, so this only happens for a
    # unit straddling the view's start, or a view copy that disagrees with the indexed one.
    start = plan.positions.get(tail[0].id) if tail else None
    if start is not None:
        for unit_ids in chosen:
            if any(plan.positions.get(i, -1) >= start for i in unit_ids):
                for i in unit_ids:
                    recalled.pop(i, None)

    section = [m for _, m in sorted(recalled.values(), key=lambda pair: pair[0])]
    out = plan.pinned + section + tail
    return Assembly(out, total_tokens(out), False, section, whole, plan.partial_turn, plan.summary_kept)
