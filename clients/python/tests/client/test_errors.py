"""ContextdError: grpcio's RpcError as plain attributes and a message naming the RPC."""

from __future__ import annotations

import pickle
import unittest

import grpc

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import ContextdError, StatusCode


class StatusError(grpc.RpcError):
    """What grpcio raises for a failed unary call: an RpcError that is also a grpc.Call."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


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

    def test_it_pickles_with_its_attributes(self) -> None:
        # Raised in a worker process, it arrives in the parent as the same error.
        copy = pickle.loads(pickle.dumps(ContextdError(StatusCode.NOT_FOUND, "gone", "GetSession")))
        self.assertEqual((copy.code, copy.message, copy.method, str(copy)),
                         (StatusCode.NOT_FOUND, "gone", "GetSession", "GetSession: NOT_FOUND: gone"))


if __name__ == "__main__":
    unittest.main()
