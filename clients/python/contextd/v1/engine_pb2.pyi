from contextd.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FORGET_REASON_DELETED: ForgetReason
FORGET_REASON_PARENT_DELETED: ForgetReason
FORGET_REASON_RETENTION_AGE: ForgetReason
FORGET_REASON_RETENTION_IDLE: ForgetReason
FORGET_REASON_UNSPECIFIED: ForgetReason
TURN_MAINTENANCE_MODE_BACKGROUND: TurnMaintenanceMode
TURN_MAINTENANCE_MODE_FOREGROUND: TurnMaintenanceMode
TURN_MAINTENANCE_MODE_UNSPECIFIED: TurnMaintenanceMode

class BootstrapRequest(_message.Message):
    __slots__ = ["host", "runtime_settings", "session"]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    host: _types_pb2.HostContext
    runtime_settings: _types_pb2.RuntimeSettings
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ..., runtime_settings: _Optional[_Union[_types_pb2.RuntimeSettings, _Mapping]] = ...) -> None: ...

class BootstrapResponse(_message.Message):
    __slots__ = ["bootstrapped", "imported_messages", "reason"]
    BOOTSTRAPPED_FIELD_NUMBER: _ClassVar[int]
    IMPORTED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    bootstrapped: bool
    imported_messages: int
    reason: str
    def __init__(self, bootstrapped: bool = ..., imported_messages: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ContextEngineServiceAfterTurnRequest(_message.Message):
    __slots__ = ["auto_compaction_summary", "host", "messages", "pre_prompt_message_count", "runtime_settings", "session", "token_budget"]
    AUTO_COMPACTION_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PRE_PROMPT_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    auto_compaction_summary: str
    host: _types_pb2.HostContext
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    pre_prompt_message_count: int
    runtime_settings: _types_pb2.RuntimeSettings
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., pre_prompt_message_count: _Optional[int] = ..., auto_compaction_summary: _Optional[str] = ..., token_budget: _Optional[int] = ..., runtime_settings: _Optional[_Union[_types_pb2.RuntimeSettings, _Mapping]] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class ContextEngineServiceAfterTurnResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ContextEngineServiceAssembleRequest(_message.Message):
    __slots__ = ["available_tools", "host", "messages", "model", "prompt", "runtime_settings", "session", "token_budget"]
    AVAILABLE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    available_tools: _containers.RepeatedScalarFieldContainer[str]
    host: _types_pb2.HostContext
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    model: str
    prompt: str
    runtime_settings: _types_pb2.RuntimeSettings
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., token_budget: _Optional[int] = ..., available_tools: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., prompt: _Optional[str] = ..., runtime_settings: _Optional[_Union[_types_pb2.RuntimeSettings, _Mapping]] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class ContextEngineServiceAssembleResponse(_message.Message):
    __slots__ = ["context_projection", "estimated_tokens", "kept_entry_ids", "messages", "prompt_authority", "system_prompt_addition"]
    CONTEXT_PROJECTION_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEPT_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_ADDITION_FIELD_NUMBER: _ClassVar[int]
    context_projection: _types_pb2.ContextProjection
    estimated_tokens: int
    kept_entry_ids: _containers.RepeatedScalarFieldContainer[str]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    prompt_authority: _types_pb2.PromptAuthority
    system_prompt_addition: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., estimated_tokens: _Optional[int] = ..., system_prompt_addition: _Optional[str] = ..., prompt_authority: _Optional[_Union[_types_pb2.PromptAuthority, str]] = ..., kept_entry_ids: _Optional[_Iterable[str]] = ..., context_projection: _Optional[_Union[_types_pb2.ContextProjection, _Mapping]] = ...) -> None: ...

class ContextEngineServiceCompactRequest(_message.Message):
    __slots__ = ["compaction_target", "current_token_count", "custom_instructions", "force", "host", "messages", "runtime_settings", "session", "token_budget"]
    COMPACTION_TARGET_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    compaction_target: _types_pb2.CompactionTarget
    current_token_count: int
    custom_instructions: str
    force: bool
    host: _types_pb2.HostContext
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    runtime_settings: _types_pb2.RuntimeSettings
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., token_budget: _Optional[int] = ..., force: bool = ..., current_token_count: _Optional[int] = ..., compaction_target: _Optional[_Union[_types_pb2.CompactionTarget, str]] = ..., custom_instructions: _Optional[str] = ..., runtime_settings: _Optional[_Union[_types_pb2.RuntimeSettings, _Mapping]] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class ContextEngineServiceCompactResponse(_message.Message):
    __slots__ = ["compacted", "ok", "reason", "result"]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    ok: bool
    reason: str
    result: _types_pb2.CompactionResult
    def __init__(self, ok: bool = ..., compacted: bool = ..., reason: _Optional[str] = ..., result: _Optional[_Union[_types_pb2.CompactionResult, _Mapping]] = ...) -> None: ...

class ContextEngineServiceMaintainRequest(_message.Message):
    __slots__ = ["host", "runtime_settings", "session"]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    host: _types_pb2.HostContext
    runtime_settings: _types_pb2.RuntimeSettings
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., runtime_settings: _Optional[_Union[_types_pb2.RuntimeSettings, _Mapping]] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class ContextEngineServiceMaintainResponse(_message.Message):
    __slots__ = ["bytes_freed", "changed", "reason", "rewritten_entries"]
    BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    bytes_freed: int
    changed: bool
    reason: str
    rewritten_entries: int
    def __init__(self, changed: bool = ..., bytes_freed: _Optional[int] = ..., rewritten_entries: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ContextEngineServicePrepareSubagentSpawnRequest(_message.Message):
    __slots__ = ["child", "context_mode", "host", "parent", "ttl_ms"]
    CHILD_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MODE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    child: _types_pb2.SessionRef
    context_mode: _types_pb2.SubagentContextMode
    host: _types_pb2.HostContext
    parent: _types_pb2.SessionRef
    ttl_ms: int
    def __init__(self, parent: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., child: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., context_mode: _Optional[_Union[_types_pb2.SubagentContextMode, str]] = ..., ttl_ms: _Optional[int] = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class ContextEngineServicePrepareSubagentSpawnResponse(_message.Message):
    __slots__ = ["rollback_handle"]
    ROLLBACK_HANDLE_FIELD_NUMBER: _ClassVar[int]
    rollback_handle: str
    def __init__(self, rollback_handle: _Optional[str] = ...) -> None: ...

class ContextEngineServiceRollbackSubagentSpawnRequest(_message.Message):
    __slots__ = ["child", "rollback_handle"]
    CHILD_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_HANDLE_FIELD_NUMBER: _ClassVar[int]
    child: _types_pb2.SessionRef
    rollback_handle: str
    def __init__(self, rollback_handle: _Optional[str] = ..., child: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class ContextEngineServiceRollbackSubagentSpawnResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DisposeRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DisposeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class EngineCapabilities(_message.Message):
    __slots__ = ["after_turn", "bootstrap", "dispose", "forget", "ingest_batch", "maintain", "subagents"]
    AFTER_TURN_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    DISPOSE_FIELD_NUMBER: _ClassVar[int]
    FORGET_FIELD_NUMBER: _ClassVar[int]
    INGEST_BATCH_FIELD_NUMBER: _ClassVar[int]
    MAINTAIN_FIELD_NUMBER: _ClassVar[int]
    SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    after_turn: bool
    bootstrap: bool
    dispose: bool
    forget: bool
    ingest_batch: bool
    maintain: bool
    subagents: bool
    def __init__(self, bootstrap: bool = ..., ingest_batch: bool = ..., after_turn: bool = ..., maintain: bool = ..., subagents: bool = ..., dispose: bool = ..., forget: bool = ...) -> None: ...

class EngineInfo(_message.Message):
    __slots__ = ["capabilities", "host_requirements", "id", "name", "owns_compaction", "protocol_versions", "turn_maintenance_mode", "version"]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    HOST_REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNS_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    TURN_MAINTENANCE_MODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    capabilities: EngineCapabilities
    host_requirements: _containers.RepeatedScalarFieldContainer[str]
    id: str
    name: str
    owns_compaction: bool
    protocol_versions: _containers.RepeatedScalarFieldContainer[int]
    turn_maintenance_mode: TurnMaintenanceMode
    version: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[str] = ..., owns_compaction: bool = ..., turn_maintenance_mode: _Optional[_Union[TurnMaintenanceMode, str]] = ..., capabilities: _Optional[_Union[EngineCapabilities, _Mapping]] = ..., host_requirements: _Optional[_Iterable[str]] = ..., protocol_versions: _Optional[_Iterable[int]] = ...) -> None: ...

class ForgetSessionRequest(_message.Message):
    __slots__ = ["deleted_at_ms", "reason", "session"]
    DELETED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    deleted_at_ms: int
    reason: ForgetReason
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., reason: _Optional[_Union[ForgetReason, str]] = ..., deleted_at_ms: _Optional[int] = ...) -> None: ...

class ForgetSessionResponse(_message.Message):
    __slots__ = ["purged"]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    purged: bool
    def __init__(self, purged: bool = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: EngineInfo
    def __init__(self, info: _Optional[_Union[EngineInfo, _Mapping]] = ...) -> None: ...

class IngestBatchRequest(_message.Message):
    __slots__ = ["host", "is_heartbeat", "messages", "session"]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IS_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    host: _types_pb2.HostContext
    is_heartbeat: bool
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., is_heartbeat: bool = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class IngestBatchResponse(_message.Message):
    __slots__ = ["ingested_count"]
    INGESTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ingested_count: int
    def __init__(self, ingested_count: _Optional[int] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ["host", "is_heartbeat", "message", "session"]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IS_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    host: _types_pb2.HostContext
    is_heartbeat: bool
    message: _types_pb2.Message
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., message: _Optional[_Union[_types_pb2.Message, _Mapping]] = ..., is_heartbeat: bool = ..., host: _Optional[_Union[_types_pb2.HostContext, _Mapping]] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ["ingested"]
    INGESTED_FIELD_NUMBER: _ClassVar[int]
    ingested: bool
    def __init__(self, ingested: bool = ...) -> None: ...

class OnSubagentEndedRequest(_message.Message):
    __slots__ = ["child", "reason"]
    CHILD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    child: _types_pb2.SessionRef
    reason: _types_pb2.SubagentEndReason
    def __init__(self, child: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., reason: _Optional[_Union[_types_pb2.SubagentEndReason, str]] = ...) -> None: ...

class OnSubagentEndedResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class TurnMaintenanceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ForgetReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
