"""The errors of the engine SDK: what an engine method raises to answer a status, and why an engine
could not start or register."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:
    from contextd.v1 import registry_pb2

__all__ = [
    "EngineDefinitionError",
    "EngineError",
    "EngineStartError",
    "HostCallError",
    "RegistrationError",
    "ServeOptionsError",
]


class EngineError(Exception):
    """Raise from an engine method to answer its caller with this gRPC status.

        raise EngineError(grpc.StatusCode.FAILED_PRECONDITION, "session s1 was never bootstrapped")

    Anything else an engine method raises answers INTERNAL. Note that the registry quarantines an
    engine that keeps answering errors, so raise one only when the call really failed.
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        if not isinstance(code, grpc.StatusCode) or code is grpc.StatusCode.OK:
            raise ValueError(f"EngineError needs a grpc.StatusCode other than OK, got {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class HostCallError(EngineError):
    """A HostService call failed; `code` is what the host (or the transport) answered.

    An engine method that lets it propagate answers its own caller with the same status.
    """

    def __init__(self, code: grpc.StatusCode, rpc: str, details: str) -> None:
        super().__init__(code, f"HostService.{rpc}: {details}")
        self.rpc = rpc
        self.details = details


class EngineStartError(Exception):
    """serve_engine could not start: the definition or the options are wrong, or the address cannot
    be bound. Run as a program's main loop (block=True), serve_engine prints it as one line and exits 2."""


class EngineDefinitionError(EngineStartError, ValueError):
    """The Engine given to serve_engine is not valid (id, name, methods)."""


class ServeOptionsError(EngineStartError, ValueError):
    """An option of serve_engine (or the environment variable it defaults from) is not valid."""


class RegistrationError(Exception):
    """Registration failed for good: a refusal or a status that retrying cannot fix.

    The engine keeps serving (contextd may still be reconfigured); RunningEngine.wait_registered()
    raises it.
    """

    def __init__(
        self,
        message: str,
        *,
        refusal: int | None = None,
        code: grpc.StatusCode | None = None,
        response: registry_pb2.RegisterEngineResponse | None = None,
    ) -> None:
        super().__init__(message)
        self.refusal = refusal
        self.code = code
        self.response = response
