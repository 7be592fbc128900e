from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

COMPACTION_TARGET_BUDGET: CompactionTarget
COMPACTION_TARGET_THRESHOLD: CompactionTarget
COMPACTION_TARGET_UNSPECIFIED: CompactionTarget
DESCRIPTOR: _descriptor.FileDescriptor
MODE_DEGRADED: Mode
MODE_FALLBACK: Mode
MODE_NORMAL: Mode
MODE_UNSPECIFIED: Mode
PROMPT_AUTHORITY_ASSEMBLED: PromptAuthority
PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW: PromptAuthority
PROMPT_AUTHORITY_UNSPECIFIED: PromptAuthority
PROMPT_CACHE_RETENTION_24H: PromptCacheRetention
PROMPT_CACHE_RETENTION_IN_MEMORY: PromptCacheRetention
PROMPT_CACHE_RETENTION_LONG: PromptCacheRetention
PROMPT_CACHE_RETENTION_NONE: PromptCacheRetention
PROMPT_CACHE_RETENTION_SHORT: PromptCacheRetention
PROMPT_CACHE_RETENTION_UNSPECIFIED: PromptCacheRetention
ROLE_ASSISTANT: Role
ROLE_BASH_EXECUTION: Role
ROLE_BRANCH_SUMMARY: Role
ROLE_COMPACTION_SUMMARY: Role
ROLE_CUSTOM: Role
ROLE_SYSTEM: Role
ROLE_TOOL_RESULT: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
SELECTION_SOURCE_CONFIGURED: SelectionSource
SELECTION_SOURCE_DEFAULT: SelectionSource
SELECTION_SOURCE_REQUESTED: SelectionSource
SELECTION_SOURCE_UNSPECIFIED: SelectionSource
SUBAGENT_CONTEXT_MODE_FORK: SubagentContextMode
SUBAGENT_CONTEXT_MODE_ISOLATED: SubagentContextMode
SUBAGENT_CONTEXT_MODE_UNSPECIFIED: SubagentContextMode
SUBAGENT_END_REASON_COMPLETED: SubagentEndReason
SUBAGENT_END_REASON_DELETED: SubagentEndReason
SUBAGENT_END_REASON_RELEASED: SubagentEndReason
SUBAGENT_END_REASON_SWEPT: SubagentEndReason
SUBAGENT_END_REASON_UNSPECIFIED: SubagentEndReason

class CompactionEntry(_message.Message):
    __slots__ = ["details", "engine_id", "first_kept_entry_id", "summary", "tokens_after", "tokens_before"]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_KEPT_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    details: _struct_pb2.Struct
    engine_id: str
    first_kept_entry_id: str
    summary: str
    tokens_after: int
    tokens_before: int
    def __init__(self, summary: _Optional[str] = ..., first_kept_entry_id: _Optional[str] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., engine_id: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CompactionResult(_message.Message):
    __slots__ = ["details", "first_kept_entry_id", "summary", "tokens_after", "tokens_before"]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    FIRST_KEPT_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    details: _struct_pb2.Struct
    first_kept_entry_id: str
    summary: str
    tokens_after: int
    tokens_before: int
    def __init__(self, summary: _Optional[str] = ..., first_kept_entry_id: _Optional[str] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ["image", "text", "thinking", "tool_call"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    image: ImageBlock
    text: TextBlock
    thinking: ThinkingBlock
    tool_call: ToolCallBlock
    def __init__(self, text: _Optional[_Union[TextBlock, _Mapping]] = ..., image: _Optional[_Union[ImageBlock, _Mapping]] = ..., thinking: _Optional[_Union[ThinkingBlock, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallBlock, _Mapping]] = ...) -> None: ...

class ContextProjection(_message.Message):
    __slots__ = ["epoch", "fingerprint", "mode"]
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_PER_TURN: ContextProjection.Mode
    MODE_THREAD_BOOTSTRAP: ContextProjection.Mode
    MODE_UNSPECIFIED: ContextProjection.Mode
    epoch: str
    fingerprint: str
    mode: ContextProjection.Mode
    def __init__(self, mode: _Optional[_Union[ContextProjection.Mode, str]] = ..., epoch: _Optional[str] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ["cache_read", "cache_write", "input", "output", "total"]
    CACHE_READ_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    cache_read: float
    cache_write: float
    input: float
    output: float
    total: float
    def __init__(self, input: _Optional[float] = ..., output: _Optional[float] = ..., cache_read: _Optional[float] = ..., cache_write: _Optional[float] = ..., total: _Optional[float] = ...) -> None: ...

class CustomEntry(_message.Message):
    __slots__ = ["custom_type", "data_json"]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    custom_type: str
    data_json: str
    def __init__(self, custom_type: _Optional[str] = ..., data_json: _Optional[str] = ...) -> None: ...

class HostContext(_message.Message):
    __slots__ = ["endpoint", "expires_at_ms", "token"]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    expires_at_ms: int
    token: str
    def __init__(self, endpoint: _Optional[str] = ..., token: _Optional[str] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class ImageBlock(_message.Message):
    __slots__ = ["data", "extra_json", "mime_type", "uri"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    extra_json: str
    mime_type: str
    uri: str
    def __init__(self, mime_type: _Optional[str] = ..., data: _Optional[bytes] = ..., uri: _Optional[str] = ..., extra_json: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["api", "content", "content_is_text", "custom_type", "details_json", "error_message", "exclude_from_context", "extra_json", "id", "is_error", "metadata", "model", "provider", "response_id", "role", "stop_reason", "timestamp_ms", "token_count", "tool_call_id", "tool_name", "usage"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    API_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_IS_TEXT_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FROM_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    api: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    content_is_text: bool
    custom_type: str
    details_json: str
    error_message: str
    exclude_from_context: bool
    extra_json: str
    id: str
    is_error: bool
    metadata: _containers.ScalarMap[str, str]
    model: str
    provider: str
    response_id: str
    role: Role
    stop_reason: str
    timestamp_ms: int
    token_count: int
    tool_call_id: str
    tool_name: str
    usage: Usage
    def __init__(self, id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., timestamp_ms: _Optional[int] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., is_error: bool = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., custom_type: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., token_count: _Optional[int] = ..., api: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., stop_reason: _Optional[str] = ..., response_id: _Optional[str] = ..., error_message: _Optional[str] = ..., details_json: _Optional[str] = ..., content_is_text: bool = ..., exclude_from_context: bool = ..., extra_json: _Optional[str] = ...) -> None: ...

class PromptCache(_message.Message):
    __slots__ = ["broke", "expires_at_ms", "last_call_cache_read_tokens", "last_call_cache_write_tokens", "last_call_input_tokens", "last_call_output_tokens", "last_touch_ms", "retention"]
    BROKE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_CACHE_READ_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LAST_TOUCH_MS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    broke: bool
    expires_at_ms: int
    last_call_cache_read_tokens: int
    last_call_cache_write_tokens: int
    last_call_input_tokens: int
    last_call_output_tokens: int
    last_touch_ms: int
    retention: PromptCacheRetention
    def __init__(self, retention: _Optional[_Union[PromptCacheRetention, str]] = ..., last_call_input_tokens: _Optional[int] = ..., last_call_cache_read_tokens: _Optional[int] = ..., last_call_cache_write_tokens: _Optional[int] = ..., last_call_output_tokens: _Optional[int] = ..., broke: bool = ..., last_touch_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class RuntimeEntry(_message.Message):
    __slots__ = ["type"]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    type: str
    def __init__(self, type: _Optional[str] = ...) -> None: ...

class RuntimeSettings(_message.Message):
    __slots__ = ["diagnostics", "engine_selection", "limits", "model", "prompt_cache", "runtime", "schema_version"]
    class Diagnostics(_message.Message):
        __slots__ = ["degraded_reason", "fallback_reason"]
        DEGRADED_REASON_FIELD_NUMBER: _ClassVar[int]
        FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
        degraded_reason: str
        fallback_reason: str
        def __init__(self, fallback_reason: _Optional[str] = ..., degraded_reason: _Optional[str] = ...) -> None: ...
    class EngineSelection(_message.Message):
        __slots__ = ["selected_id", "source"]
        SELECTED_ID_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        selected_id: str
        source: SelectionSource
        def __init__(self, selected_id: _Optional[str] = ..., source: _Optional[_Union[SelectionSource, str]] = ...) -> None: ...
    class Limits(_message.Message):
        __slots__ = ["max_output_tokens", "prompt_token_budget"]
        MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
        PROMPT_TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
        max_output_tokens: int
        prompt_token_budget: int
        def __init__(self, prompt_token_budget: _Optional[int] = ..., max_output_tokens: _Optional[int] = ...) -> None: ...
    class Model(_message.Message):
        __slots__ = ["family", "provider", "requested", "resolved"]
        FAMILY_FIELD_NUMBER: _ClassVar[int]
        PROVIDER_FIELD_NUMBER: _ClassVar[int]
        REQUESTED_FIELD_NUMBER: _ClassVar[int]
        RESOLVED_FIELD_NUMBER: _ClassVar[int]
        family: str
        provider: str
        requested: str
        resolved: str
        def __init__(self, requested: _Optional[str] = ..., resolved: _Optional[str] = ..., provider: _Optional[str] = ..., family: _Optional[str] = ...) -> None: ...
    class Runtime(_message.Message):
        __slots__ = ["harness_id", "host", "mode", "runtime_id"]
        HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        MODE_FIELD_NUMBER: _ClassVar[int]
        RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
        harness_id: str
        host: str
        mode: Mode
        runtime_id: str
        def __init__(self, host: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., harness_id: _Optional[str] = ..., runtime_id: _Optional[str] = ...) -> None: ...
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_SELECTION_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    diagnostics: RuntimeSettings.Diagnostics
    engine_selection: RuntimeSettings.EngineSelection
    limits: RuntimeSettings.Limits
    model: RuntimeSettings.Model
    prompt_cache: PromptCache
    runtime: RuntimeSettings.Runtime
    schema_version: int
    def __init__(self, schema_version: _Optional[int] = ..., runtime: _Optional[_Union[RuntimeSettings.Runtime, _Mapping]] = ..., engine_selection: _Optional[_Union[RuntimeSettings.EngineSelection, _Mapping]] = ..., model: _Optional[_Union[RuntimeSettings.Model, _Mapping]] = ..., limits: _Optional[_Union[RuntimeSettings.Limits, _Mapping]] = ..., diagnostics: _Optional[_Union[RuntimeSettings.Diagnostics, _Mapping]] = ..., prompt_cache: _Optional[_Union[PromptCache, _Mapping]] = ...) -> None: ...

class SessionRef(_message.Message):
    __slots__ = ["agent_id", "session_id", "session_key"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    session_key: str
    def __init__(self, session_id: _Optional[str] = ..., session_key: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ["extra_json", "signature", "text"]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    extra_json: str
    signature: str
    text: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ..., extra_json: _Optional[str] = ...) -> None: ...

class ThinkingBlock(_message.Message):
    __slots__ = ["extra_json", "redacted", "signature", "thinking"]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    extra_json: str
    redacted: bool
    signature: str
    thinking: str
    def __init__(self, thinking: _Optional[str] = ..., signature: _Optional[str] = ..., redacted: bool = ..., extra_json: _Optional[str] = ...) -> None: ...

class ToolCallBlock(_message.Message):
    __slots__ = ["arguments_json", "extra_json", "id", "name", "signature"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    extra_json: str
    id: str
    name: str
    signature: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., signature: _Optional[str] = ..., extra_json: _Optional[str] = ...) -> None: ...

class TranscriptEntry(_message.Message):
    __slots__ = ["compaction", "custom", "extra_json", "hidden", "id", "message", "message_key", "parent_id", "revision", "runtime", "runtime_type", "seq", "timestamp_ms"]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    compaction: CompactionEntry
    custom: CustomEntry
    extra_json: str
    hidden: bool
    id: str
    message: Message
    message_key: str
    parent_id: str
    revision: int
    runtime: RuntimeEntry
    runtime_type: str
    seq: int
    timestamp_ms: int
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., seq: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., compaction: _Optional[_Union[CompactionEntry, _Mapping]] = ..., custom: _Optional[_Union[CustomEntry, _Mapping]] = ..., runtime: _Optional[_Union[RuntimeEntry, _Mapping]] = ..., revision: _Optional[int] = ..., runtime_type: _Optional[str] = ..., extra_json: _Optional[str] = ..., hidden: bool = ..., message_key: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cache_read", "cache_write", "cost", "input", "output", "total"]
    CACHE_READ_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    cache_read: int
    cache_write: int
    cost: Cost
    input: int
    output: int
    total: int
    def __init__(self, input: _Optional[int] = ..., output: _Optional[int] = ..., cache_read: _Optional[int] = ..., cache_write: _Optional[int] = ..., total: _Optional[int] = ..., cost: _Optional[_Union[Cost, _Mapping]] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SelectionSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PromptCacheRetention(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CompactionTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SubagentContextMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SubagentEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PromptAuthority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
