from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

ABORTED: ErrorReason
ALREADY_EXISTS: ErrorReason
CANCELLED: ErrorReason
COMPACTION_CONFLICT: ErrorReason
DATA_LOSS: ErrorReason
DEADLINE_EXCEEDED: ErrorReason
DESCRIPTOR: _descriptor.FileDescriptor
ENGINE_FAILED: ErrorReason
ENGINE_NOT_REGISTERED: ErrorReason
ENGINE_REVOKED: ErrorReason
ENGINE_UNREACHABLE: ErrorReason
ERROR_REASON_UNSPECIFIED: ErrorReason
FAILED_PRECONDITION: ErrorReason
HOST_CALL_FAILED: ErrorReason
IDEMPOTENCY_KEY_REUSED: ErrorReason
INTERNAL: ErrorReason
INVALID_ARGUMENT: ErrorReason
LIMIT_EXCEEDED: ErrorReason
MODEL_BAD_RESPONSE: ErrorReason
MODEL_RATE_LIMITED: ErrorReason
MODEL_REJECTED: ErrorReason
MODEL_SPEND_LIMITED: ErrorReason
MODEL_TIMEOUT: ErrorReason
MODEL_UNAVAILABLE: ErrorReason
NOT_FOUND: ErrorReason
OUT_OF_RANGE: ErrorReason
PERMISSION_DENIED: ErrorReason
QUOTA_EXCEEDED: ErrorReason
RESOURCE_EXHAUSTED: ErrorReason
SESSION_ALREADY_EXISTS: ErrorReason
SESSION_NOT_FOUND: ErrorReason
STORE_UNAVAILABLE: ErrorReason
THROTTLED: ErrorReason
UNAUTHENTICATED: ErrorReason
UNAVAILABLE: ErrorReason
UNIMPLEMENTED: ErrorReason
UNKNOWN: ErrorReason

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
