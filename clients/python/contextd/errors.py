"""The one exception a failed contextd call raises.

grpcio raises `grpc.RpcError`, whose status lives behind methods (`code()`, `details()`) that only
some of its subclasses have; callers of contextd want the status as plain attributes and a message
that says which call failed. contextd's own messages name the field or limit that was wrong
("session.session_id is required"), so `message` is worth showing to a person as it is.
"""

from __future__ import annotations

import grpc

__all__ = ["ContextdError"]


class ContextdError(Exception):
    """A contextd call answered with a gRPC status other than OK.

    code: the grpc.StatusCode (`err.code == grpc.StatusCode.NOT_FOUND`; `err.code.name` is "NOT_FOUND").
    message: the server's status message (for contextd: it names the field or limit).
    method: the RPC that failed, e.g. "Assemble" ("" when not known).

    The client raises it `from` the grpc.RpcError, which stays available as `__cause__`.
    """

    def __init__(self, code: grpc.StatusCode, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        super().__init__(f"{method + ': ' if method else ''}{code.name}: {message}")

    def __reduce__(self) -> tuple[type[ContextdError], tuple[grpc.StatusCode, str, str]]:
        # Exceptions pickle their args; ours are (code, message, method), not the formatted text.
        return (type(self), (self.code, self.message, self.method))

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
        return cls(code, details if isinstance(details, str) else str(error), method)
