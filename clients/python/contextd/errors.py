"""The one exception a failed contextd call raises.

grpcio raises `grpc.RpcError`, whose status lives behind methods (`code()`, `details()`) that only
some of its subclasses have; callers of contextd want the status as plain attributes and a message
that says which call failed. contextd's own messages name the field or limit that was wrong
("session.session_id is required"), so `message` is worth showing to a person as it is.

A program acts on `reason` instead: the stable contextd.v1.ErrorReason name contextd sends in the
status's details (proto/contextd/v1/errors.proto), with its `metadata` and, for an invalid request
field, `field_violations`.
"""

from __future__ import annotations

from typing import NamedTuple

import grpc

__all__ = ["ContextdError", "FieldViolation"]

# Where gRPC's rich error model carries a google.rpc.Status, and the domain of contextd's reasons.
_DETAILS_TRAILER = "grpc-status-details-bin"
_ERROR_DOMAIN = "contextd.dev"


class FieldViolation(NamedTuple):
    """A request field an INVALID_ARGUMENT is about (google.rpc.BadRequest.FieldViolation)."""

    field: str  # its path in proto names, e.g. "messages[1].role"
    description: str


class ContextdError(Exception):
    """A contextd call answered with a gRPC status other than OK.

    code: the grpc.StatusCode (`err.code == grpc.StatusCode.NOT_FOUND`; `err.code.name` is "NOT_FOUND").
    message: the server's status message (for contextd: it names the field or limit).
    method: the RPC that failed, e.g. "Assemble" ("" when not known).
    reason: the contextd.v1.ErrorReason name, e.g. "SESSION_NOT_FOUND" ("" when the status carried
        none); `contextd.ErrorReason.Value(err.reason)` is its number.
    metadata: the ErrorInfo metadata the reason's comment lists, e.g. {"session_id": "chat-42"}.
    field_violations: the request fields an INVALID_ARGUMENT is about.

    The client raises it `from` the grpc.RpcError, which stays available as `__cause__`.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        method: str = "",
        reason: str = "",
        metadata: dict[str, str] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
    ) -> None:
        self.code = code
        self.message = message
        self.method = method
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.field_violations = tuple(field_violations)
        super().__init__(f"{method + ': ' if method else ''}{code.name}: {message}")

    def __reduce__(self) -> tuple[type[ContextdError], tuple[object, ...]]:
        # Exceptions pickle their args; ours are the attributes, not the formatted text.
        return (type(self), (self.code, self.message, self.method, self.reason, self.metadata, self.field_violations))

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError, method: str = "") -> ContextdError:
        """The ContextdError for a grpcio error. An RpcError without a status (grpcio raises some
        before a call starts) maps to UNKNOWN with its text."""
        code_of = getattr(error, "code", None)
        details_of = getattr(error, "details", None)
        code = code_of() if callable(code_of) else None
        details = details_of() if callable(details_of) else None
        if not isinstance(code, grpc.StatusCode):
            code = grpc.StatusCode.UNKNOWN
        reason, metadata, violations = _status_details(error)
        return cls(code, details if isinstance(details, str) else str(error), method, reason, metadata, violations)


def _status_details(error: grpc.RpcError) -> tuple[str, dict[str, str], tuple[FieldViolation, ...]]:
    """The contextd ErrorInfo and BadRequest of the google.rpc.Status in the error's trailers."""
    trailing_of = getattr(error, "trailing_metadata", None)
    trailers = trailing_of() if callable(trailing_of) else None
    encoded = next((v for k, v in trailers or () if k == _DETAILS_TRAILER and isinstance(v, bytes)), None)
    if encoded is None:
        return "", {}, ()
    try:
        # googleapis-common-protos' modules when installed (grpcio-status uses them), else the
        # package's own copy: one process must not register google.rpc twice.
        from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from contextd.google.rpc import error_details_pb2, status_pb2
    from google.protobuf.message import DecodeError

    reason, metadata, violations = "", {}, []
    try:
        status = status_pb2.Status.FromString(encoded)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) and not reason:
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                if info.domain == _ERROR_DOMAIN:
                    reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    except DecodeError:
        return "", {}, ()
    return reason, metadata, tuple(violations)
