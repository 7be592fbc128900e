"""ContextdError: grpcio's RpcError as plain attributes and a message naming the RPC."""

from __future__ import annotations

import pickle
import unittest

import grpc

import _paths  # noqa: F401 - puts the package on sys.path

from google.protobuf import any_pb2

from contextd import ContextdError, ErrorReason, FieldViolation, StatusCode
from contextd.google.rpc import error_details_pb2, status_pb2


class StatusError(grpc.RpcError):
    """What grpcio raises for a failed unary call: an RpcError that is also a grpc.Call."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple[tuple[str, bytes], ...] = ()) -> None:
        super().__init__(details)
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._trailers


def details_trailer(*details: object, code: int = 3, message: str = "m") -> tuple[tuple[str, bytes], ...]:
    """The grpc-status-details-bin trailer contextd sends: a google.rpc.Status packing `details`."""
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        packed.append(a)
    return (("grpc-status-details-bin", status_pb2.Status(code=code, message=message, details=packed).SerializeToString()),)


class ContextdErrorTest(unittest.TestCase):
    def test_status_and_message_of_an_rpc_error(self) -> None:
        err = ContextdError.from_rpc_error(
            StatusError(grpc.StatusCode.INVALID_ARGUMENT, "token_budget must be greater than 0"), "Assemble")
        self.assertIs(err.code, StatusCode.INVALID_ARGUMENT)
        self.assertEqual(err.message, "token_budget must be greater than 0")
        self.assertEqual(err.method, "Assemble")
        self.assertEqual(str(err), "Assemble: INVALID_ARGUMENT: token_budget must be greater than 0")

    def test_an_rpc_error_without_a_status_is_unknown(self) -> None:
        err = ContextdError.from_rpc_error(grpc.RpcError("channel closed"), "GetSession")
        self.assertIs(err.code, StatusCode.UNKNOWN)
        self.assertEqual(err.message, "channel closed")

    def test_without_a_method(self) -> None:
        self.assertEqual(str(ContextdError(StatusCode.NOT_FOUND, "session x not found")), "NOT_FOUND: session x not found")

    def test_the_reason_metadata_and_field_violations_of_the_status_details(self) -> None:
        info = error_details_pb2.ErrorInfo(reason="INVALID_ARGUMENT", domain="contextd.dev", metadata={"k": "v"})
        bad = error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field="messages[1].role", description="messages[1].role is required")])
        err = ContextdError.from_rpc_error(
            StatusError(grpc.StatusCode.INVALID_ARGUMENT, "messages[1].role is required", details_trailer(info, bad)), "AppendMessages")
        self.assertEqual(err.reason, "INVALID_ARGUMENT")
        self.assertEqual(ErrorReason.Value(err.reason), ErrorReason.INVALID_ARGUMENT)
        self.assertEqual(err.metadata, {"k": "v"})
        self.assertEqual(err.field_violations, (FieldViolation("messages[1].role", "messages[1].role is required"),))

    def test_no_reason_without_details_or_from_another_domain(self) -> None:
        self.assertEqual(ContextdError.from_rpc_error(StatusError(grpc.StatusCode.UNAVAILABLE, "down")).reason, "")
        other = error_details_pb2.ErrorInfo(reason="API_DISABLED", domain="googleapis.com")
        self.assertEqual(ContextdError.from_rpc_error(StatusError(grpc.StatusCode.NOT_FOUND, "x", details_trailer(other))).reason, "")
        garbage = (("grpc-status-details-bin", b"\xff\xff\xff"),)
        self.assertEqual(ContextdError.from_rpc_error(StatusError(grpc.StatusCode.NOT_FOUND, "x", garbage)).reason, "")

    def test_it_pickles_with_its_attributes(self) -> None:
        # Raised in a worker process, it arrives in the parent as the same error.
        copy = pickle.loads(pickle.dumps(ContextdError(StatusCode.NOT_FOUND, "gone", "GetSession")))
        self.assertEqual((copy.code, copy.message, copy.method, str(copy)),
                         (StatusCode.NOT_FOUND, "gone", "GetSession", "GetSession: NOT_FOUND: gone"))


if __name__ == "__main__":
    unittest.main()
