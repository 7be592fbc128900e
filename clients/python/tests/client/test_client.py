"""contextd.Client without a contextd: deadlines, argument checks and error mapping.

The peers here are the operating system's, not stand-ins for contextd: a closed port (the
connection is refused) and a listening socket that never answers (the TCP handshake completes, the
HTTP/2 one never does), which is exactly where a call without a deadline would wait forever.
"""

from __future__ import annotations

import socket
import time
import unittest

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import Client, ContextdError, StatusCode
from contextd.v1 import session_pb2 as S


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SilentPeer:
    """Accepts TCP connections (the kernel's backlog does) and never says a word."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        return "127.0.0.1:%d" % self.sock.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


class ClientOptionsTest(unittest.TestCase):
    def test_defaults(self) -> None:
        with Client() as cx:
            self.assertEqual(cx.address, "127.0.0.1:50051")
            self.assertEqual(cx.timeout, 30.0)
        with Client("127.0.0.1:1", timeout=None) as cx:
            self.assertIsNone(cx.timeout)

    def test_a_timeout_must_be_a_positive_number_of_seconds(self) -> None:
        for bad in (0, -1, float("nan"), float("inf"), "5", True):
            with self.subTest(timeout=bad), self.assertRaisesRegex(ValueError, "timeout must be a positive number"):
                Client("127.0.0.1:1", timeout=bad)  # type: ignore[arg-type]
        with Client("127.0.0.1:1") as cx, self.assertRaisesRegex(ValueError, "Assemble: timeout must be a positive"):
            cx.assemble(session="s", token_budget=1, timeout=0)

    def test_a_bad_token_is_refused_at_construction(self) -> None:
        with self.assertRaisesRegex(ValueError, "not a valid bearer token"):
            Client("127.0.0.1:1", token="from-a-file\n")

    def test_argument_errors_are_raised_before_anything_is_sent(self) -> None:
        # Against a closed port: any call that went out would fail UNAVAILABLE instead.
        with Client("127.0.0.1:%d" % closed_port()) as cx:
            with self.assertRaisesRegex(TypeError, r"assemble\(\) got an unknown field 'budget'"):
                cx.assemble(session="s", budget=1)
            with self.assertRaisesRegex(TypeError, r"get_session\(\) takes a GetSessionRequest"):
                cx.get_session(S.AssembleRequest())  # type: ignore[arg-type]
            with self.assertRaisesRegex(TypeError, "^session: "):
                next(cx.transcript(42))  # type: ignore[arg-type]


class CallFailuresTest(unittest.TestCase):
    def test_a_refused_connection_is_unavailable_naming_the_rpc(self) -> None:
        with Client("127.0.0.1:%d" % closed_port(), timeout=10) as cx:
            with self.assertRaises(ContextdError) as caught:
                cx.get_session(session="s")
        self.assertIs(caught.exception.code, StatusCode.UNAVAILABLE)
        self.assertEqual(caught.exception.method, "GetSession")
        self.assertTrue(str(caught.exception).startswith("GetSession: UNAVAILABLE: "))

    def test_the_client_deadline_bounds_a_silent_peer(self) -> None:
        with SilentPeer() as address, Client(address, timeout=0.3) as cx:
            started = time.monotonic()
            with self.assertRaises(ContextdError) as caught:
                cx.assemble(session="s", token_budget=100)
            elapsed = time.monotonic() - started
        self.assertIs(caught.exception.code, StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(caught.exception.method, "Assemble")
        self.assertLess(elapsed, 5.0)

    def test_a_call_timeout_overrides_the_client_one(self) -> None:
        with SilentPeer() as address, Client(address, timeout=600) as cx:
            started = time.monotonic()
            with self.assertRaises(ContextdError) as caught:
                cx.list_sessions(timeout=0.3)
            self.assertIs(caught.exception.code, StatusCode.DEADLINE_EXCEEDED)
            self.assertLess(time.monotonic() - started, 5.0)

    def test_wait_ready_fails_fast_on_a_wrong_address(self) -> None:
        with SilentPeer() as address, Client(address) as cx:
            with self.assertRaises(ContextdError) as caught:
                cx.wait_ready(timeout=0.3)
        self.assertIs(caught.exception.code, StatusCode.UNAVAILABLE)
        self.assertIn("not connected to " + address, caught.exception.message)


if __name__ == "__main__":
    unittest.main()
