"""Turns and tool pairs: the units an engine keeps or drops when it selects part of the host's view.

A **turn** is a user message and every message after it up to the next user message: the
assistant's replies, its tool calls and their tool results. Messages before the first user message
(a view that starts mid-turn, e.g. right after a compaction) form a **leading fragment**, which is
treated like a turn. An engine that fits a view into a token budget keeps or drops whole turns, or
cuts one turn to a tail (``longest_fitting_tail``), so that what the model sees still reads as a
conversation.

A **tool pair** is an assistant message's ``tool_call`` block and the ``ROLE_TOOL_RESULT`` message
that answers it (``tool_call_id``). Pairs stay whole: a result without the call before it, or a
call without its result, is a transcript a model provider rejects or that misleads the model, so a
selection never cuts between the two. Pairs are matched within a turn (a runtime appends a call's
result before the next user message), and by position: the host does not require tool-call ids to
be unique (``src/host/validate.ts`` checks only that they are set, and some runtimes reuse them), so
each result answers the nearest earlier call of its id that is still unanswered. ``pair_tools``
repairs a malformed turn rather than passing it on: a result that answers no call is dropped, and a
call that never got a result (an aborted run) is removed from its assistant message (its stored
``token_count`` is kept, so estimates stay upper bounds). A well-formed turn is returned untouched
(the same list, the same objects), so an engine can still answer it by id
(``contextd.engine.keep_messages``). A turn may be repaired to nothing (a leading fragment of only
results whose calls were before the view): ``paired_turns`` leaves such turns out, so every turn it
returns has a first message.

Token counts are the host's (``Message.token_count``); nothing is counted here. Pure: no I/O, no
gRPC, and like ``contextd.pinned`` this module imports only the generated types. Turns are plain
lists, because engines slice and concatenate them.

    turns = paired_turns(rest)      # rest: the view without pinned messages; may be []
    if turns:
        newest = turns[-1]          # never empty
        tail = longest_fitting_tail(newest[1:], budget - tokens(newest[0]))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from contextd.v1 import types_pb2

__all__ = ["longest_fitting_tail", "pair_tools", "paired_turns", "split_turns", "tokens", "tool_call_ids", "total_tokens"]

M = TypeVar("M", bound=types_pb2.Message)


def tokens(message: types_pb2.Message) -> int:
    """The host's token count of `message` (0 when unset; never negative)."""
    return max(0, int(message.token_count or 0))


def total_tokens(messages: Iterable[types_pb2.Message]) -> int:
    """The sum of `tokens` over `messages`."""
    return sum(tokens(m) for m in messages)


def tool_call_ids(message: types_pb2.Message) -> list[str]:
    """The ids of the tool calls in `message`'s content, in block order."""
    return [b.tool_call.id for b in message.content if b.WhichOneof("block") == "tool_call"]


def split_turns(messages: Iterable[M]) -> list[list[M]]:
    """Turns, oldest first: each starts at a user message (the first may be a leading fragment)."""
    turns: list[list[M]] = []
    for m in messages:
        if m.role == types_pb2.ROLE_USER or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def _without_blocks(message: M, drop: set[int]) -> M | None:
    """A copy of `message` without its content blocks at the indexes in `drop` (None when nothing is left)."""
    copy = type(message)()
    copy.CopyFrom(message)
    del copy.content[:]
    for j, b in enumerate(message.content):
        if j not in drop:
            copy.content.add().CopyFrom(b)
    return copy if len(copy.content) > 0 else None


def pair_tools(turn: list[M]) -> list[M]:
    """The turn with every tool result after its call and every call answered (see the module doc).

    Returns `turn` itself (the same list) when it is already well formed; otherwise a new list in
    which only the messages that lost a call are copies. The input is never modified.
    """
    # Per call id, its unanswered calls as (message index, block index), oldest first: a result
    # takes the newest of them.
    open_calls: dict[str, list[tuple[int, int]]] = {}
    orphan_results: set[int] = set()
    for i, m in enumerate(turn):
        if m.role == types_pb2.ROLE_TOOL_RESULT:
            waiting = open_calls.get(m.tool_call_id)
            if waiting:
                waiting.pop()
            else:
                orphan_results.add(i)
        for j, b in enumerate(m.content):
            if b.WhichOneof("block") == "tool_call":
                open_calls.setdefault(b.tool_call.id, []).append((i, j))
    dangling: dict[int, set[int]] = {}  # message index -> indexes of its unanswered call blocks
    for calls in open_calls.values():
        for i, j in calls:
            dangling.setdefault(i, set()).add(j)
    if not orphan_results and not dangling:
        return turn
    out: list[M] = []
    for i, m in enumerate(turn):
        if i in orphan_results:
            continue
        if i in dangling:
            stripped = _without_blocks(m, dangling[i])
            if stripped is None:
                continue
            m = stripped
        out.append(m)
    return out


def paired_turns(messages: Iterable[M]) -> list[list[M]]:
    """``split_turns`` then ``pair_tools`` on each turn, leaving out the turns repaired to nothing.

    What an engine selects from: every turn is well formed and non-empty, so ``turns[-1][0]`` exists
    whenever ``turns`` does. An empty answer means the view (without its pinned messages) holds no
    conversation at all, e.g. only tool results whose calls were compacted away: the engine answers
    as for an empty history.
    """
    return [t for t in (pair_tools(turn) for turn in split_turns(messages)) if t]


def longest_fitting_tail(body: Sequence[M], budget: float) -> list[M]:
    """The longest tail of `body` whose tokens fit `budget` and that cuts no tool pair: it never
    starts with, or contains, a tool result whose call lies before the cut. May be empty.

    `body` is a well-formed turn (``pair_tools``'s answer), or its messages after its user message
    when the engine keeps that one anyway. Always a new list.
    """
    best = len(body)
    used = 0
    # Per call id, how many results in the tail have their call before the cut. Counted, not a set:
    # ids may repeat, and a tail holding one call of an id may hold two of its results.
    waiting: dict[str, int] = {}
    for start in range(len(body) - 1, -1, -1):
        m = body[start]
        used += tokens(m)
        if used > budget:
            break
        if m.role == types_pb2.ROLE_TOOL_RESULT:
            waiting[m.tool_call_id] = waiting.get(m.tool_call_id, 0) + 1
        for cid in tool_call_ids(m):
            if waiting.get(cid, 0) > 1:
                waiting[cid] -= 1
            else:
                waiting.pop(cid, None)
        if not waiting:
            best = start
    return list(body[best:])
