"""Building and reading contextd messages without spelling out every nested proto.

A message's content is a list of blocks (text, thinking, tool call, image); most messages a runtime
sends are one text block, and reading one back mostly wants its text. These helpers are the Python
counterparts of src/contract/messages.ts: `text_of` joins blocks exactly as the host does when it
counts or summarises, and the compaction summary is recognised by its metadata, never its wording.

    from contextd import messages as m
    turn = [m.user("Fix the failing test"),
            m.assistant("Reading it.", tool_calls=[m.tool_call("call_1", "read_file", {"path": "app.py"})]),
            m.tool_result("call_1", "read_file", "def app(): ...")]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from contextd.v1 import types_pb2

__all__ = [
    "SUMMARY_METADATA_KEY",
    "SUMMARY_METADATA_VALUE",
    "assistant",
    "is_compaction_summary",
    "message",
    "system",
    "text_block",
    "text_of",
    "tool_call",
    "tool_result",
    "user",
]

#: Metadata key that marks the user message carrying a compaction summary in an active view.
SUMMARY_METADATA_KEY = "contextd.kind"
SUMMARY_METADATA_VALUE = "compaction_summary"


def text_block(text: str) -> types_pb2.ContentBlock:
    """A content block holding `text`."""
    return types_pb2.ContentBlock(text=types_pb2.TextBlock(text=text))


def tool_call(id: str, name: str, arguments: Mapping[str, Any] | str = "{}") -> types_pb2.ContentBlock:  # noqa: A002 - the proto's name
    """A tool-call content block; `arguments` is a dict (encoded as JSON) or the JSON text itself."""
    arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments, separators=(",", ":"))
    return types_pb2.ContentBlock(tool_call=types_pb2.ToolCallBlock(id=id, name=name, arguments_json=arguments_json))


def message(role: types_pb2.Role | int, *content: types_pb2.ContentBlock | str, **fields: Any) -> types_pb2.Message:
    """A message of `role` whose content blocks are `content` (a str becomes a text block);
    `fields` are other Message fields (timestamp_ms=..., metadata={...}, id=...)."""
    blocks = [text_block(c) if isinstance(c, str) else c for c in content]
    return types_pb2.Message(role=role, content=blocks, **fields)


def user(text: str, **fields: Any) -> types_pb2.Message:
    """A user message of one text block."""
    return message(types_pb2.ROLE_USER, text, **fields)


def system(text: str, **fields: Any) -> types_pb2.Message:
    """A system message (engines keep these pinned at the start of the view)."""
    return message(types_pb2.ROLE_SYSTEM, text, **fields)


def assistant(
    text: str = "",
    tool_calls: Iterable[types_pb2.ContentBlock | types_pb2.ToolCallBlock] = (),
    **fields: Any,
) -> types_pb2.Message:
    """An assistant message: its text (no text block when empty), then its tool calls in order
    (blocks from `tool_call`, or ToolCallBlock protos)."""
    blocks: list[types_pb2.ContentBlock] = [text_block(text)] if text else []
    for call in tool_calls:
        if isinstance(call, types_pb2.ToolCallBlock):
            call = types_pb2.ContentBlock(tool_call=call)
        elif not (isinstance(call, types_pb2.ContentBlock) and call.WhichOneof("block") == "tool_call"):
            raise TypeError(f"assistant(tool_calls=...): expected tool_call(...) blocks, got {type(call).__name__}")
        blocks.append(call)
    return message(types_pb2.ROLE_ASSISTANT, *blocks, **fields)


def tool_result(tool_call_id: str, tool_name: str, text: str, is_error: bool = False, **fields: Any) -> types_pb2.Message:
    """The result of the tool call `tool_call_id`: one text block."""
    return message(
        types_pb2.ROLE_TOOL_RESULT, text, tool_call_id=tool_call_id, tool_name=tool_name, is_error=is_error, **fields
    )


def text_of(msg: types_pb2.Message) -> str:
    """The text of every text, thinking and tool-call (`name(arguments)`) block, one per line; images
    contribute nothing. The same text the host counts and summarises (messageText in TypeScript)."""
    parts: list[str] = []
    for block in msg.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            part = block.text.text
        elif kind == "thinking":
            part = block.thinking.thinking
        elif kind == "tool_call":
            part = f"{block.tool_call.name}({block.tool_call.arguments_json})"
        else:
            part = ""
        if part:
            parts.append(part)
    return "\n".join(parts)


def is_compaction_summary(msg: types_pb2.Message) -> bool:
    """True for the message that carries a compaction's summary in an assembled or active view."""
    return msg.metadata.get(SUMMARY_METADATA_KEY) == SUMMARY_METADATA_VALUE
