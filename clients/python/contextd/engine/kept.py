"""Assemble answers by reference (engine.proto `kept_entry_ids`), as the TypeScript SDK's keepMessages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextd.v1 import engine_pb2, types_pb2


def keep_messages(
    request: engine_pb2.ContextEngineServiceAssembleRequest, messages: Sequence[types_pb2.Message]
) -> dict[str, Any]:
    """The fields of an Assemble answer for `messages`, what the model should see.

    `messages` is the assembled context as the engine built it: messages it adds (its own summary,
    a note) first, then messages of `request.messages`, unchanged, in the request's order. Those are
    answered by id, so the answer is a few bytes per message instead of the whole view, and the
    host sends its own stored copy on. Any other shape (an added message after a kept one, a
    request message out of order or changed) answers the echo form `{"messages": ...}`, always
    valid. Merge the result into the answer: `{**keep_messages(request, chosen), "estimated_tokens": n}`.
    """
    position = {m.id: i for i, m in enumerate(request.messages) if m.id}
    first = 0
    while first < len(messages) and messages[first].id not in position:
        first += 1
    kept_ids: list[str] = []
    last = -1
    for m in messages[first:]:
        at = position.get(m.id, -1)
        if at <= last or m != request.messages[at]:
            return {"messages": list(messages)}
        last = at
        kept_ids.append(m.id)
    return {"messages": list(messages[:first]), "kept_entry_ids": kept_ids}
