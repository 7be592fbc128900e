"""What the model sees: the budgeted layout of `recall`. Pure (no SQLite, no gRPC).

The layout is made for providers' prompt caches, which serve the longest prefix of a prompt
identical to the previous request's: between two model calls the answer should only grow at its
end. So it keeps the view in order and puts what it recalls *after* the stable part:

    pinned · [block₁] turn₁ · [block₂] turn₂ · … · [block of the newest turn] newest turn

- **Pinned messages** first (system messages and the host's compaction summary,
  `contextd.pinned.split_pinned`).
- **The view's turns**, oldest first, each as the view holds it (turns repaired by
  `contextd.turns.paired_turns`: no result without its call, no call without its result).
- **A turn's recalled block** sits just before the turn's user message: the messages recalled for
  that turn's request (index.RecallUnit, whole units), chosen once per turn and then kept as they
  are (`RecallIndex.set_block`), like a memory tool's result in a transcript. So a turn's tool loop
  sees the same block at the same place, and a new turn only appends its own block. The newest
  turn's block may take at most BLOCK_SHARE of the budget (what the pinned messages leave).
- **The older part slides in steps**: when the layout does not fit, or leaves the newest turn's
  block less than MIN_ROOM of the room it wants, the oldest turns (with their blocks) are dropped
  until the dropped tokens reach the overflow (room included) rounded *up* to a multiple of
  STEP_SHARE of the budget. The set of dropped
  turns therefore only changes when the overflow crosses a step, and between two steps the prompt
  is append-only. The host's compaction (when the view outgrows the budget) starts a new view, and
  the steps count from its start.

When the pinned messages and the latest user message alone do not fit, that is the answer, flagged
`overflow`. When the newest turn alone does not fit next to the pinned messages, it is cut to the
latest user message plus the longest tail that fits and cuts no tool pair
(contextd.turns.longest_fitting_tail), and nothing else is shown. Tokens are the host's: the view's
`token_count`s, and for a message recalled from the index the count it had when ingested. Never
over the budget, except for the flagged overflow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from contextd.pinned import is_system, split_pinned
from contextd.turns import longest_fitting_tail, pair_tools, paired_turns, total_tokens
from contextd.v1 import types_pb2

Message = types_pb2.Message

#: The most the newest turn's recalled block may take, as a share of the budget the pinned messages
#: leave. Every block stays in the prompt as long as its turn does, so this also bounds what recall
#: costs the cache per turn. See README.md, Decisions.
BLOCK_SHARE = 0.05
#: The older part of the view is dropped in steps of this share of the budget (hysteresis): between
#: steps the prompt only grows at its end. See README.md, Decisions.
STEP_SHARE = 0.25
#: A new block is given at least this share of its room before the older part steps to make more:
#: less, and a block is chosen smaller instead (the engine compacts ahead, so the next one has room).
MIN_ROOM = 0.5


#: The anchor of a block recalled for a prompt that is not the latest user message's text: the user
#: message the runtime is about to send (OpenClaw assembles before appending it). Such a block goes
#: after the newest turn, where that message will follow it.
UPCOMING = "upcoming"


def anchor_of(turn: Sequence[Message]) -> str:
    """The id a turn's recalled block is stored under: its user message's (empty: a leading fragment)."""
    return turn[0].id if turn and turn[0].role == types_pb2.ROLE_USER else ""


@dataclass
class Layout:
    """Step 1: what the view contributes, and the room left for the newest turn's block."""

    pinned: list[Message]
    older: list[list[Message]]  # the kept older turns, oldest first
    blocks: dict[str, list[Message]]  # anchor id -> the stored block shown before that kept older turn
    newest: list[Message]  # the newest turn (cut when `partial_turn`); [] for an empty history
    anchor: str  # what the new block is for: the newest turn's anchor, or UPCOMING ("": no block)
    newest_block: list[Message]  # UPCOMING: the newest turn's own stored block, shown before it
    used: int  # tokens of everything above
    limit: float  # the budget (inf: none)
    room: float  # what the newest turn's block may take
    overflow: bool
    partial_turn: bool
    dropped_turns: int  # older turns of the view left out
    summary_kept: bool

    def shown_ids(self) -> set[str]:
        """Ids of every message the layout shows (a new block must not repeat them)."""
        out = {m.id for m in self.pinned if m.id} | {m.id for m in self.newest if m.id} | {m.id for m in self.newest_block if m.id}
        for turn in self.older:
            out.update(m.id for m in turn if m.id)
        for block in self.blocks.values():
            out.update(m.id for m in block if m.id)
        return out


@dataclass
class Assembly:
    messages: list[Message]  # what the model sees, in order
    estimated_tokens: int
    overflow: bool
    recalled: list[Message] = field(default_factory=list)  # every recalled message shown (all blocks)
    block: list[Message] = field(default_factory=list)  # the newest turn's block
    whole_turns: int = 0
    partial_turn: bool = False
    summary_kept: bool = False
    dropped_turns: int = 0


def is_summary(message: Message) -> bool:
    """The host's compaction summary (pinned, and not a system message)."""
    return not is_system(message) and message.metadata.get("contextd.kind") == "compaction_summary"


def plan_layout(
    view: Sequence[Message],
    budget: int | None,
    blocks: Mapping[str, list[Message]],
    reserve: int = 0,
    upcoming: bool = False,
    want_block: bool = True,
    block_share: float = BLOCK_SHARE,
    step_share: float = STEP_SHARE,
) -> Layout:
    """Step 1 (see the module doc). `budget` None: no limit. `blocks`: stored blocks by anchor id
    (those of turns the view no longer holds are ignored). `reserve`: the tokens of the newest
    turn's block when one is already stored for this request, else 0; the room set aside for it is
    at least that and at most BLOCK_SHARE of the budget. `upcoming`: the request's prompt is not the
    latest user message's (see UPCOMING): the new block goes after the newest turn, and the newest
    turn keeps its own stored block before it. `want_block` False (no prompt): no room is set aside."""
    head, rest = split_pinned(view)
    base = total_tokens(head)
    limit = math.inf if budget is None else float(budget)
    summary_kept = any(is_summary(m) for m in head)

    def layout(
        older: list[list[Message]],
        newest: list[Message],
        anchor: str,
        used: int,
        room: float,
        overflow: bool,
        partial: bool,
        dropped: int,
        own: list[Message] | None = None,
    ) -> Layout:
        shown = {a: blocks[a] for a in (anchor_of(t) for t in older) if a and blocks.get(a)}
        return Layout(head, older, shown, newest, anchor, own or [], used, limit, room, overflow, partial, dropped, summary_kept)

    turns = paired_turns(rest)  # without the turns the tool-pair repair leaves empty
    if not turns:
        return layout([], [], "", base, 0, base > limit, False, 0)
    newest = turns[-1]
    latest_user = [newest[0]] if newest[0].role == types_pb2.ROLE_USER else []
    body = newest[len(latest_user) :]
    required = base + total_tokens(latest_user)
    if required > limit:
        return layout([], latest_user, "", required, 0, True, bool(body), len(turns) - 1)
    if base + total_tokens(newest) > limit:
        tail = latest_user + longest_fitting_tail(body, int(limit - required))
        return layout([], tail, "", base + total_tokens(tail), 0, False, True, len(turns) - 1)

    own = list(blocks.get(anchor_of(newest)) or ()) if upcoming else []
    anchor = UPCOMING if upcoming else anchor_of(newest)
    if base + total_tokens(newest) + total_tokens(own) > limit:
        own = []
    older = turns[:-1]
    cost = [total_tokens(t) + total_tokens(blocks.get(anchor_of(t)) or ()) for t in older]
    fixed = total_tokens(newest) + total_tokens(own)
    used = base + fixed + sum(cost)
    free = limit - base - fixed  # what the newest turn leaves, before any older turn
    room = 0.0 if not (anchor and want_block) else min(free, max(float(reserve), block_share * (limit - base)))
    start = 0
    if math.isinf(limit):
        return layout(older, newest, anchor, used, math.inf if anchor and want_block else 0.0, False, False, 0, own)
    # The room is wanted, not owed: while at least MIN_ROOM of it is left, a smaller block is the
    # price of keeping the layout (the engine compacts ahead, so the next call has room again).
    overflow = used + room - limit if limit - used < MIN_ROOM * room else 0
    if overflow > 0:
        step = max(1.0, step_share * (limit - base))
        target = math.ceil(overflow / step) * step
        dropped = 0
        while start < len(older) and dropped < target:
            dropped += cost[start]
            start += 1
        used -= dropped
    room = min(room, limit - used) if anchor else 0.0
    return layout(older[start:], newest, anchor, used, room, False, False, start, own)


def choose_block(
    units: Iterable, room: float, exclude: set[str], view_by_id: Mapping[str, Message] | None = None, max_units: int | None = None
) -> list[Message]:
    """The newest turn's block: `units` (index.RecallUnit-like: messages, ids; best first) that fit
    `room`, each whole or not at all, none repeating a message in `exclude` (what the layout shows).
    A message the view also holds is taken as the view holds it (the host's current copy); each
    unit is repaired again (pair_tools) so that no call comes without its result. Best first."""
    view_by_id = view_by_id or {}
    out: list[Message] = []
    taken = set(exclude)
    left = room
    count = 0
    for unit in units:
        if left <= 0 or (max_units is not None and count >= max_units):
            break
        if any(i in taken for i in unit.ids):
            continue
        messages = pair_tools([view_by_id.get(m.id, m) for m in unit.messages])
        cost = total_tokens(messages)
        if not messages or cost > left:
            continue
        left -= cost
        taken.update(unit.ids)
        out.extend(messages)
        count += 1
    return out


def complete(layout: Layout, block: Sequence[Message]) -> Assembly:
    """Step 2: the answer, with `block` (which must fit `layout.room`) before the newest turn, or
    after it for an UPCOMING message."""
    if layout.overflow:
        return Assembly(layout.pinned + layout.newest, layout.used, True, [], [], 0, layout.partial_turn, layout.summary_kept, layout.dropped_turns)
    block = list(block) if layout.anchor else []
    out = list(layout.pinned)
    recalled: list[Message] = []
    for turn in layout.older:
        shown = layout.blocks.get(anchor_of(turn)) or []
        out += shown
        recalled += shown
        out += turn
    recalled += layout.newest_block
    if layout.anchor == UPCOMING:
        out += layout.newest_block + layout.newest + block
    else:
        out += block + layout.newest
    recalled += block
    whole = 0 if layout.partial_turn or not layout.newest else len(layout.older) + 1
    return Assembly(out, total_tokens(out), False, recalled, block, whole, layout.partial_turn, layout.summary_kept, layout.dropped_turns)
