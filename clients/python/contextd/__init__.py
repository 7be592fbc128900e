"""contextd for Python: a typed SessionService client (contextd.Client, and contextd.AsyncClient for
asyncio), message helpers, the
generated stubs (contextd.v1, contextd.health.v1) and an engine SDK (contextd.engine, imported on
its own so that a runtime never loads server code).

    import contextd
    from contextd import messages as m

    with contextd.Client("127.0.0.1:50051", token=token) as cx:
        cx.append_messages(session="chat-42", messages=[m.user("Fix the failing test")])
        ctx = cx.assemble(session="chat-42", token_budget=32_000)
        print(contextd.Mode.Name(ctx.mode))        # "MODE_NORMAL"

The enums are the generated EnumTypeWrappers, re-exported so that `Role.ROLE_USER` works and
`Mode.Name(value)` prints a name without importing contextd.v1.types_pb2.
"""

from __future__ import annotations

import grpc

from contextd import messages
from contextd.async_client import AsyncClient
from contextd.channels import CHANNEL_OPTIONS, TlsConfig, bearer, open_aio_channel, open_channel
from contextd.client import DEFAULT_ADDRESS, DEFAULT_TIMEOUT_S, Client
from contextd.errors import ContextdError, FieldViolation
from contextd.messages import (
    SUMMARY_METADATA_KEY,
    SUMMARY_METADATA_VALUE,
    assistant,
    is_compaction_summary,
    system,
    text_block,
    text_of,
    tool_call,
    tool_result,
    user,
)
from contextd.sessions import SessionLike, session_ref
from contextd.v1 import errors_pb2, search_pb2, session_pb2, types_pb2

__version__ = "0.1.0"

# Status codes, so that `err.code == contextd.StatusCode.NOT_FOUND` needs no grpc import.
StatusCode = grpc.StatusCode

# Enums (EnumTypeWrapper: `.Name(value)`, `.Value(name)`, attribute access to each value).
Role = types_pb2.Role
Mode = types_pb2.Mode
PromptAuthority = types_pb2.PromptAuthority
CompactionTarget = types_pb2.CompactionTarget
SelectionSource = types_pb2.SelectionSource
SubagentContextMode = types_pb2.SubagentContextMode
SubagentEndReason = types_pb2.SubagentEndReason
SearchScope = search_pb2.SearchScope
SearchOrder = search_pb2.SearchOrder
# The stable reasons of ContextdError.reason: `ErrorReason.Value(err.reason)`, `ErrorReason.SESSION_NOT_FOUND`.
ErrorReason = errors_pb2.ErrorReason

# The messages a runtime builds or reads most.
Message = types_pb2.Message
SessionRef = types_pb2.SessionRef
ContentBlock = types_pb2.ContentBlock
TextBlock = types_pb2.TextBlock
ToolCallBlock = types_pb2.ToolCallBlock
TranscriptEntry = types_pb2.TranscriptEntry

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_ADDRESS",
    "DEFAULT_TIMEOUT_S",
    "SUMMARY_METADATA_KEY",
    "SUMMARY_METADATA_VALUE",
    "AsyncClient",
    "Client",
    "CompactionTarget",
    "ContentBlock",
    "ContextdError",
    "ErrorReason",
    "FieldViolation",
    "Message",
    "Mode",
    "PromptAuthority",
    "Role",
    "SelectionSource",
    "SessionLike",
    "SessionRef",
    "StatusCode",
    "SubagentContextMode",
    "SubagentEndReason",
    "SearchScope",
    "SearchOrder",
    "TextBlock",
    "TlsConfig",
    "ToolCallBlock",
    "TranscriptEntry",
    "assistant",
    "bearer",
    "is_compaction_summary",
    "messages",
    "open_aio_channel",
    "open_channel",
    "session_pb2",
    "session_ref",
    "system",
    "text_block",
    "text_of",
    "tool_call",
    "tool_result",
    "types_pb2",
    "user",
]
