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
result before the next user message). ``pair_tools`` repairs a malformed turn rather than passing
it on: a result whose call is not earlier in its turn is dropped, and a call that never got a result
(an aborted run) is removed from its assistant message (its stored ``token_count`` is kept, so
estimates stay upper bounds). A well-formed turn is returned untouched (the same list, the same
objects), so an engine can still answer it by id (``contextd.engine.keep_messages``).

Token counts are the host's (``Message.token_count``); nothing is counted here. Pure: no I/O, no
gRPC, and like ``contextd.pinned`` this module imports only the generated types. Turns are plain
lists, because engines slice and concatenate them.

    turns = [pair_tools(t) for t in split_turns(rest)]     # rest: the view without pinned messages
    newest = turns[-1]
    tail = longest_fitting_tail(newest[1:], budget - tokens(newest[0]))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from contextd.v1 import types_pb2

__all__ = ["longest_fitting_tail", "pair_tools", "split_turns", "tokens", "tool_call_ids", "total_tokens"]

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


def _without_calls(message: M, drop_ids: set[str]) -> M | None:
    """A copy of `message` without the tool_call blocks in `drop_ids` (None when nothing is left)."""
    copy = type(message)()
    copy.CopyFrom(message)
    del copy.content[:]
    for b in message.content:
        if b.WhichOneof("block") == "tool_call" and b.tool_call.id in drop_ids:
            continue
        copy.content.add().CopyFrom(b)
    return copy if len(copy.content) > 0 else None


def pair_tools(turn: list[M]) -> list[M]:
    """The turn with every tool result after its call and every call answered (see the module doc).

    Returns `turn` itself (the same list) when it is already well formed; otherwise a new list in
    which only the messages that lost a call are copies. The input is never modified.
    """
    called: set[str] = set()
    answered: set[str] = set()
    orphan_results: set[int] = set()
    for i, m in enumerate(turn):
        if m.role == types_pb2.ROLE_TOOL_RESULT:
            if m.tool_call_id in called:
                answered.add(m.tool_call_id)
            else:
                orphan_results.add(i)
        called.update(tool_call_ids(m))
    dangling = called - answered
    if not orphan_results and not dangling:
        return turn
    out: list[M] = []
    for i, m in enumerate(turn):
        if i in orphan_results:
            continue
        if dangling and any(cid in dangling for cid in tool_call_ids(m)):
            stripped = _without_calls(m, dangling)
            if stripped is None:
                continue
            m = stripped
        out.append(m)
    return out


def longest_fitting_tail(body: Sequence[M], budget: float) -> list[M]:
    """The longest tail of `body` whose tokens fit `budget` and that cuts no tool pair: it never
    starts with, or contains, a tool result whose call lies before the cut. May be empty.

    `body` is a well-formed turn (``pair_tools``'s answer), or its messages after its user message
    when the engine keeps that one anyway. Always a new list.
    """
    best = len(body)
    used = 0
    waiting: set[str] = set()  # results in the tail whose call is not in it (yet)
    for start in range(len(body) - 1, -1, -1):
        m = body[start]
        used += tokens(m)
        if used > budget:
            break
        if m.role == types_pb2.ROLE_TOOL_RESULT:
            waiting.add(m.tool_call_id)
        for cid in tool_call_ids(m):
            waiting.discard(cid)
        if not waiting:
            best = start
    return list(body[best:])
