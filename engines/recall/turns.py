"""Turns and tool pairs of a message list: the shape rules every selection of `recall` keeps. Pure.

Messages are contextd.v1 `Message` protobufs (anything with the same attributes works). Token
counts are the host's (`Message.token_count`); nothing is counted here.

- A turn starts at a user message and runs up to the next one; messages before the first user
  message form a leading fragment, treated like a turn.
- Tool pairs are matched within a turn (a runtime appends a call's result before the next user
  message). `pair_tools` repairs a malformed turn rather than passing it on: a result whose call is
  not earlier in its turn is dropped, and a call that never got a result (an aborted run) is
  removed from its assistant message (its stored token_count is kept, so estimates stay upper
  bounds). Well-formed turns are returned untouched (the same list, the same objects), which is
  what lets the engine answer them by id (kept_entry_ids).

The same rules as engines/window/assembly.py, repeated here because an engine imports only the SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contextd.v1 import types_pb2

Message = types_pb2.Message


def tokens(message: Message) -> int:
    return max(0, int(message.token_count or 0))


def total_tokens(messages: Iterable[Message]) -> int:
    return sum(tokens(m) for m in messages)


def tool_call_ids(message: Message) -> list[str]:
    return [b.tool_call.id for b in message.content if b.WhichOneof("block") == "tool_call"]


def split_turns(messages: Iterable[Message]) -> list[list[Message]]:
    """Turns, oldest first: each starts at a user message (the first may be a leading fragment)."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == types_pb2.ROLE_USER or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def _without_calls(message: Message, drop_ids: set[str]) -> Message | None:
    """A copy of `message` without the tool_call blocks in `drop_ids` (None when nothing is left)."""
    copy = type(message)()
    copy.CopyFrom(message)
    del copy.content[:]
    for b in message.content:
        if b.WhichOneof("block") == "tool_call" and b.tool_call.id in drop_ids:
            continue
        copy.content.add().CopyFrom(b)
    return copy if len(copy.content) > 0 else None


def pair_tools(turn: list[Message]) -> list[Message]:
    """The turn with every tool result after its call and every call answered (see the module doc)."""
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
    out: list[Message] = []
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


def longest_fitting_tail(body: Sequence[Message], budget: int) -> list[Message]:
    """The longest tail of `body` (a well-formed turn's messages after its user message) whose
    tokens fit `budget` and that cuts no tool pair: it never starts with, or contains, a tool
    result whose call lies before the cut. May be empty."""
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
