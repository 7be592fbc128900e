from contextd.v1 import engine_pb2 as _engine_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ENGINE_EVENT_TYPE_DEREGISTERED: EngineEventType
ENGINE_EVENT_TYPE_HEALTH_CHANGED: EngineEventType
ENGINE_EVENT_TYPE_QUARANTINED: EngineEventType
ENGINE_EVENT_TYPE_REGISTERED: EngineEventType
ENGINE_EVENT_TYPE_RELEASED: EngineEventType
ENGINE_EVENT_TYPE_UNSPECIFIED: EngineEventType
ENGINE_HEALTH_NOT_SERVING: EngineHealth
ENGINE_HEALTH_SERVING: EngineHealth
ENGINE_HEALTH_UNKNOWN: EngineHealth
ENGINE_HEALTH_UNSPECIFIED: EngineHealth
REFUSAL_ALREADY_REGISTERED: Refusal
REFUSAL_CONTRACT_INVALID: Refusal
REFUSAL_DEFAULT_SLOT_RESERVED: Refusal
REFUSAL_ENDPOINT_NOT_ALLOWED: Refusal
REFUSAL_NONE: Refusal
REFUSAL_OWNED_BY_OTHER: Refusal
REFUSAL_TOO_MANY_INSTANCES: Refusal
REFUSAL_UNREACHABLE: Refusal
REFUSAL_UNSPECIFIED: Refusal
REFUSAL_VERSION_UNSUPPORTED: Refusal

class ClearQuarantineRequest(_message.Message):
    __slots__ = ["engine_id", "instance_id"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    instance_id: str
    def __init__(self, engine_id: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class ClearQuarantineResponse(_message.Message):
    __slots__ = ["engine"]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    engine: EngineStatus
    def __init__(self, engine: _Optional[_Union[EngineStatus, _Mapping]] = ...) -> None: ...

class DeregisterEngineRequest(_message.Message):
    __slots__ = ["engine_id", "instance_id"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    instance_id: str
    def __init__(self, engine_id: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class DeregisterEngineResponse(_message.Message):
    __slots__ = ["deregistered"]
    DEREGISTERED_FIELD_NUMBER: _ClassVar[int]
    deregistered: bool
    def __init__(self, deregistered: bool = ...) -> None: ...

class EngineEvent(_message.Message):
    __slots__ = ["at_ms", "engine", "instance_id", "message", "type"]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    engine: EngineStatus
    instance_id: str
    message: str
    type: EngineEventType
    def __init__(self, type: _Optional[_Union[EngineEventType, str]] = ..., engine: _Optional[_Union[EngineStatus, _Mapping]] = ..., at_ms: _Optional[int] = ..., message: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class EngineInstance(_message.Message):
    __slots__ = ["calls", "endpoint", "failures", "health", "instance_id", "local", "locality", "outstanding_calls", "quarantine", "registered_at_ms", "timeouts", "version"]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    OUTSTANDING_CALLS_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    calls: int
    endpoint: str
    failures: int
    health: EngineHealth
    instance_id: str
    local: bool
    locality: Locality
    outstanding_calls: int
    quarantine: QuarantineState
    registered_at_ms: int
    timeouts: int
    version: str
    def __init__(self, instance_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., locality: _Optional[_Union[Locality, _Mapping]] = ..., health: _Optional[_Union[EngineHealth, str]] = ..., quarantine: _Optional[_Union[QuarantineState, _Mapping]] = ..., registered_at_ms: _Optional[int] = ..., outstanding_calls: _Optional[int] = ..., calls: _Optional[int] = ..., failures: _Optional[int] = ..., timeouts: _Optional[int] = ..., version: _Optional[str] = ..., local: bool = ...) -> None: ...

class EngineStatus(_message.Message):
    __slots__ = ["builtin", "calls", "endpoint", "engine_id", "failures", "fallbacks", "fallbacks_by_reason", "health", "info", "instances", "owner", "quarantine", "registered_at_ms", "timeouts"]
    class FallbacksByReasonEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_BY_REASON_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    builtin: bool
    calls: int
    endpoint: str
    engine_id: str
    failures: int
    fallbacks: int
    fallbacks_by_reason: _containers.ScalarMap[str, int]
    health: EngineHealth
    info: _engine_pb2.EngineInfo
    instances: _containers.RepeatedCompositeFieldContainer[EngineInstance]
    owner: str
    quarantine: QuarantineState
    registered_at_ms: int
    timeouts: int
    def __init__(self, engine_id: _Optional[str] = ..., owner: _Optional[str] = ..., endpoint: _Optional[str] = ..., info: _Optional[_Union[_engine_pb2.EngineInfo, _Mapping]] = ..., health: _Optional[_Union[EngineHealth, str]] = ..., quarantine: _Optional[_Union[QuarantineState, _Mapping]] = ..., registered_at_ms: _Optional[int] = ..., calls: _Optional[int] = ..., failures: _Optional[int] = ..., fallbacks: _Optional[int] = ..., timeouts: _Optional[int] = ..., builtin: bool = ..., fallbacks_by_reason: _Optional[_Mapping[str, int]] = ..., instances: _Optional[_Iterable[_Union[EngineInstance, _Mapping]]] = ...) -> None: ...

class GetEngineRequest(_message.Message):
    __slots__ = ["engine_id"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    def __init__(self, engine_id: _Optional[str] = ...) -> None: ...

class GetEngineResponse(_message.Message):
    __slots__ = ["engine"]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    engine: EngineStatus
    def __init__(self, engine: _Optional[_Union[EngineStatus, _Mapping]] = ...) -> None: ...

class ListEnginesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListEnginesResponse(_message.Message):
    __slots__ = ["engines"]
    ENGINES_FIELD_NUMBER: _ClassVar[int]
    engines: _containers.RepeatedCompositeFieldContainer[EngineStatus]
    def __init__(self, engines: _Optional[_Iterable[_Union[EngineStatus, _Mapping]]] = ...) -> None: ...

class Locality(_message.Message):
    __slots__ = ["node", "replica", "zone"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    node: str
    replica: str
    zone: str
    def __init__(self, node: _Optional[str] = ..., zone: _Optional[str] = ..., replica: _Optional[str] = ...) -> None: ...

class QuarantineEngineRequest(_message.Message):
    __slots__ = ["engine_id", "instance_id", "reason"]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    instance_id: str
    reason: str
    def __init__(self, engine_id: _Optional[str] = ..., reason: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class QuarantineEngineResponse(_message.Message):
    __slots__ = ["engine"]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    engine: EngineStatus
    def __init__(self, engine: _Optional[_Union[EngineStatus, _Mapping]] = ...) -> None: ...

class QuarantineState(_message.Message):
    __slots__ = ["ejections", "failed_at_ms", "manual", "operation", "reason", "release_at_ms"]
    EJECTIONS_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RELEASE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ejections: int
    failed_at_ms: int
    manual: bool
    operation: str
    reason: str
    release_at_ms: int
    def __init__(self, operation: _Optional[str] = ..., reason: _Optional[str] = ..., failed_at_ms: _Optional[int] = ..., release_at_ms: _Optional[int] = ..., ejections: _Optional[int] = ..., manual: bool = ...) -> None: ...

class RegisterEngineRequest(_message.Message):
    __slots__ = ["allow_same_owner_refresh", "endpoint", "engine_id", "instance_id", "locality", "owner", "protocol_versions"]
    ALLOW_SAME_OWNER_REFRESH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    allow_same_owner_refresh: bool
    endpoint: str
    engine_id: str
    instance_id: str
    locality: Locality
    owner: str
    protocol_versions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, engine_id: _Optional[str] = ..., owner: _Optional[str] = ..., endpoint: _Optional[str] = ..., allow_same_owner_refresh: bool = ..., protocol_versions: _Optional[_Iterable[int]] = ..., instance_id: _Optional[str] = ..., locality: _Optional[_Union[Locality, _Mapping]] = ...) -> None: ...

class RegisterEngineResponse(_message.Message):
    __slots__ = ["engine", "existing_owner", "instance_id", "message", "ok", "protocol_version", "refusal"]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    EXISTING_OWNER_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    engine: EngineStatus
    existing_owner: str
    instance_id: str
    message: str
    ok: bool
    protocol_version: int
    refusal: Refusal
    def __init__(self, ok: bool = ..., existing_owner: _Optional[str] = ..., refusal: _Optional[_Union[Refusal, str]] = ..., message: _Optional[str] = ..., engine: _Optional[_Union[EngineStatus, _Mapping]] = ..., protocol_version: _Optional[int] = ..., instance_id: _Optional[str] = ...) -> None: ...

class WatchEnginesRequest(_message.Message):
    __slots__ = ["include_current"]
    INCLUDE_CURRENT_FIELD_NUMBER: _ClassVar[int]
    include_current: bool
    def __init__(self, include_current: bool = ...) -> None: ...

class WatchEnginesResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: EngineEvent
    def __init__(self, event: _Optional[_Union[EngineEvent, _Mapping]] = ...) -> None: ...

class Refusal(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EngineHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EngineEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
