"""What the full-text index holds of a message, and the token that scopes a search to one session."""

from __future__ import annotations

import hashlib

from contextd.v1 import types_pb2


def searchable_text(message: types_pb2.Message) -> str:
    """What the search sees of a message: its text, tool calls (name and arguments) and tool name.
    Thinking blocks are the model's private reasoning and images have no text: left out."""
    parts: list[str] = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            parts.append(block.text.text)
        elif kind == "tool_call":
            parts.append(block.tool_call.name)
            parts.append(block.tool_call.arguments_json)
    if message.tool_name:
        parts.append(message.tool_name)
    return "\n".join(p for p in parts if p)


def scope_token(session_id: str) -> str:
    """One FTS token naming the session (a hash: session ids may hold any characters)."""
    return "s" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:24]
