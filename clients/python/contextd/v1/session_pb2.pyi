from contextd.v1 import search_pb2 as _search_pb2
from contextd.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AfterTurnRequest(_message.Message):
    __slots__ = ["auto_compaction_summary", "pre_prompt_message_count", "prompt_cache", "session", "token_budget"]
    AUTO_COMPACTION_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    PRE_PROMPT_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    auto_compaction_summary: str
    pre_prompt_message_count: int
    prompt_cache: _types_pb2.PromptCache
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., pre_prompt_message_count: _Optional[int] = ..., auto_compaction_summary: _Optional[str] = ..., token_budget: _Optional[int] = ..., prompt_cache: _Optional[_Union[_types_pb2.PromptCache, _Mapping]] = ...) -> None: ...

class AfterTurnResponse(_message.Message):
    __slots__ = ["engine_id", "fallback_reason", "mode"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    fallback_reason: str
    mode: _types_pb2.Mode
    def __init__(self, engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ..., fallback_reason: _Optional[str] = ...) -> None: ...

class AgentUsage(_message.Message):
    __slots__ = ["agent_id", "max_sessions", "max_stored_bytes", "sessions", "stored_bytes"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    max_sessions: int
    max_stored_bytes: int
    sessions: int
    stored_bytes: int
    def __init__(self, agent_id: _Optional[str] = ..., sessions: _Optional[int] = ..., stored_bytes: _Optional[int] = ..., max_sessions: _Optional[int] = ..., max_stored_bytes: _Optional[int] = ...) -> None: ...

class AppendMessagesRequest(_message.Message):
    __slots__ = ["idempotency_key", "is_heartbeat", "message_keys", "messages", "session"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    IS_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_KEYS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    is_heartbeat: bool
    message_keys: _containers.RepeatedScalarFieldContainer[str]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., is_heartbeat: bool = ..., idempotency_key: _Optional[str] = ..., message_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class AppendMessagesResponse(_message.Message):
    __slots__ = ["entry_ids", "held_indexes", "replayed", "token_counts"]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    HELD_INDEXES_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNTS_FIELD_NUMBER: _ClassVar[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[str]
    held_indexes: _containers.RepeatedScalarFieldContainer[int]
    replayed: bool
    token_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, entry_ids: _Optional[_Iterable[str]] = ..., token_counts: _Optional[_Iterable[int]] = ..., replayed: bool = ..., held_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class AssembleRequest(_message.Message):
    __slots__ = ["auto_compact", "available_tools", "model", "prompt", "prompt_cache", "session", "token_budget"]
    AUTO_COMPACT_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    auto_compact: bool
    available_tools: _containers.RepeatedScalarFieldContainer[str]
    model: str
    prompt: str
    prompt_cache: _types_pb2.PromptCache
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., token_budget: _Optional[int] = ..., prompt: _Optional[str] = ..., available_tools: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., auto_compact: bool = ..., prompt_cache: _Optional[_Union[_types_pb2.PromptCache, _Mapping]] = ...) -> None: ...

class AssembleResponse(_message.Message):
    __slots__ = ["compaction", "context_projection", "engine_id", "estimated_tokens", "fallback_reason", "messages", "mode", "prompt_authority", "stable_prefix_messages", "stable_prefix_tokens", "system_prompt_addition"]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_PROJECTION_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    STABLE_PREFIX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STABLE_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_ADDITION_FIELD_NUMBER: _ClassVar[int]
    compaction: _types_pb2.CompactionResult
    context_projection: _types_pb2.ContextProjection
    engine_id: str
    estimated_tokens: int
    fallback_reason: str
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    mode: _types_pb2.Mode
    prompt_authority: _types_pb2.PromptAuthority
    stable_prefix_messages: int
    stable_prefix_tokens: int
    system_prompt_addition: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., estimated_tokens: _Optional[int] = ..., system_prompt_addition: _Optional[str] = ..., engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ..., fallback_reason: _Optional[str] = ..., compaction: _Optional[_Union[_types_pb2.CompactionResult, _Mapping]] = ..., prompt_authority: _Optional[_Union[_types_pb2.PromptAuthority, str]] = ..., stable_prefix_messages: _Optional[int] = ..., stable_prefix_tokens: _Optional[int] = ..., context_projection: _Optional[_Union[_types_pb2.ContextProjection, _Mapping]] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ["compaction_target", "current_token_count", "custom_instructions", "force", "session", "token_budget"]
    COMPACTION_TARGET_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    compaction_target: _types_pb2.CompactionTarget
    current_token_count: int
    custom_instructions: str
    force: bool
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., token_budget: _Optional[int] = ..., force: bool = ..., compaction_target: _Optional[_Union[_types_pb2.CompactionTarget, str]] = ..., custom_instructions: _Optional[str] = ..., current_token_count: _Optional[int] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ["compacted", "engine_id", "fallback_reason", "mode", "ok", "reason", "result"]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    engine_id: str
    fallback_reason: str
    mode: _types_pb2.Mode
    ok: bool
    reason: str
    result: _types_pb2.CompactionResult
    def __init__(self, ok: bool = ..., compacted: bool = ..., reason: _Optional[str] = ..., result: _Optional[_Union[_types_pb2.CompactionResult, _Mapping]] = ..., engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ..., fallback_reason: _Optional[str] = ...) -> None: ...

class ContextOverview(_message.Message):
    __slots__ = ["message_tokens", "summary_tokens", "system_addition_tokens", "tool_result_tokens", "total_tokens"]
    MESSAGE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_ADDITION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    message_tokens: int
    summary_tokens: int
    system_addition_tokens: int
    tool_result_tokens: int
    total_tokens: int
    def __init__(self, summary_tokens: _Optional[int] = ..., message_tokens: _Optional[int] = ..., tool_result_tokens: _Optional[int] = ..., system_addition_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["keep_subagents", "session"]
    KEEP_SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    keep_subagents: bool
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., keep_subagents: bool = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ["deleted", "deleted_subagents", "forget_deliveries"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    DELETED_SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    FORGET_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    deleted_subagents: int
    forget_deliveries: int
    def __init__(self, deleted: bool = ..., deleted_subagents: _Optional[int] = ..., forget_deliveries: _Optional[int] = ...) -> None: ...

class EndSubagentRequest(_message.Message):
    __slots__ = ["child", "reason"]
    CHILD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    child: _types_pb2.SessionRef
    reason: _types_pb2.SubagentEndReason
    def __init__(self, child: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., reason: _Optional[_Union[_types_pb2.SubagentEndReason, str]] = ...) -> None: ...

class EndSubagentResponse(_message.Message):
    __slots__ = ["engine_id", "mode"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    mode: _types_pb2.Mode
    def __init__(self, engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ...) -> None: ...

class ExportTranscriptRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class ExportTranscriptResponse(_message.Message):
    __slots__ = ["entries", "jsonl"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    JSONL_FIELD_NUMBER: _ClassVar[int]
    entries: int
    jsonl: bytes
    def __init__(self, jsonl: _Optional[bytes] = ..., entries: _Optional[int] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["agent_usage", "info"]
    AGENT_USAGE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    agent_usage: AgentUsage
    info: SessionInfo
    def __init__(self, info: _Optional[_Union[SessionInfo, _Mapping]] = ..., agent_usage: _Optional[_Union[AgentUsage, _Mapping]] = ...) -> None: ...

class GetTranscriptRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetTranscriptResponse(_message.Message):
    __slots__ = ["entries", "next_page_token"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_types_pb2.TranscriptEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[_types_pb2.TranscriptEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ImportTranscriptRequest(_message.Message):
    __slots__ = ["jsonl", "session"]
    JSONL_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    jsonl: bytes
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., jsonl: _Optional[bytes] = ...) -> None: ...

class ImportTranscriptResponse(_message.Message):
    __slots__ = ["active_messages", "imported_entries", "leaf_entry_id"]
    ACTIVE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IMPORTED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LEAF_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    active_messages: int
    imported_entries: int
    leaf_entry_id: str
    def __init__(self, imported_entries: _Optional[int] = ..., leaf_entry_id: _Optional[str] = ..., active_messages: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["expiring_within_ms", "page_size", "page_token"]
    EXPIRING_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    expiring_within_ms: int
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., expiring_within_ms: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MaintainRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class MaintainResponse(_message.Message):
    __slots__ = ["bytes_freed", "changed", "engine_id", "fallback_reason", "mode", "reason", "rewritten_entries"]
    BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    bytes_freed: int
    changed: bool
    engine_id: str
    fallback_reason: str
    mode: _types_pb2.Mode
    reason: str
    rewritten_entries: int
    def __init__(self, changed: bool = ..., bytes_freed: _Optional[int] = ..., rewritten_entries: _Optional[int] = ..., reason: _Optional[str] = ..., engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ..., fallback_reason: _Optional[str] = ...) -> None: ...

class PrepareSubagentSpawnRequest(_message.Message):
    __slots__ = ["child", "context_mode", "parent", "ttl_ms"]
    CHILD_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MODE_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    child: _types_pb2.SessionRef
    context_mode: _types_pb2.SubagentContextMode
    parent: _types_pb2.SessionRef
    ttl_ms: int
    def __init__(self, parent: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., child: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., context_mode: _Optional[_Union[_types_pb2.SubagentContextMode, str]] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class PrepareSubagentSpawnResponse(_message.Message):
    __slots__ = ["child_entry_count", "engine_id", "mode", "rollback_handle"]
    CHILD_ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_HANDLE_FIELD_NUMBER: _ClassVar[int]
    child_entry_count: int
    engine_id: str
    mode: _types_pb2.Mode
    rollback_handle: str
    def __init__(self, rollback_handle: _Optional[str] = ..., child_entry_count: _Optional[int] = ..., engine_id: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.Mode, str]] = ...) -> None: ...

class RollbackSubagentSpawnRequest(_message.Message):
    __slots__ = ["rollback_handle"]
    ROLLBACK_HANDLE_FIELD_NUMBER: _ClassVar[int]
    rollback_handle: str
    def __init__(self, rollback_handle: _Optional[str] = ...) -> None: ...

class RollbackSubagentSpawnResponse(_message.Message):
    __slots__ = ["rolled_back"]
    ROLLED_BACK_FIELD_NUMBER: _ClassVar[int]
    rolled_back: bool
    def __init__(self, rolled_back: bool = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ["active_tokens", "compaction_count", "created_at_ms", "entry_count", "expires_at_ms", "last_message_key", "last_message_timestamp_ms", "message_count", "overview", "parent_session_id", "selected_engine_id", "session", "stored_bytes", "total_tokens", "updated_at_ms"]
    ACTIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    OVERVIEW_FIELD_NUMBER: _ClassVar[int]
    PARENT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SELECTED_ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    active_tokens: int
    compaction_count: int
    created_at_ms: int
    entry_count: int
    expires_at_ms: int
    last_message_key: str
    last_message_timestamp_ms: int
    message_count: int
    overview: ContextOverview
    parent_session_id: str
    selected_engine_id: str
    session: _types_pb2.SessionRef
    stored_bytes: int
    total_tokens: int
    updated_at_ms: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., entry_count: _Optional[int] = ..., message_count: _Optional[int] = ..., compaction_count: _Optional[int] = ..., total_tokens: _Optional[int] = ..., active_tokens: _Optional[int] = ..., selected_engine_id: _Optional[str] = ..., overview: _Optional[_Union[ContextOverview, _Mapping]] = ..., parent_session_id: _Optional[str] = ..., last_message_key: _Optional[str] = ..., last_message_timestamp_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., stored_bytes: _Optional[int] = ...) -> None: ...
