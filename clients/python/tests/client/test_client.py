"""contextd.Client and contextd.AsyncClient without a contextd: deadlines, argument checks and error
mapping, each scenario run against both clients (client_kinds.py); and the two surfaces compared.

The peers here are the operating system's, not stand-ins for contextd: a closed port (the
connection is refused) and a listening socket that never answers (the TCP handshake completes, the
HTTP/2 one never does), which is exactly where a call without a deadline would wait forever.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
import unittest
from collections.abc import Awaitable, Callable
from typing import Any

import _paths  # noqa: F401 - puts the package on sys.path
from client_kinds import KINDS, open_client

from contextd import AsyncClient, Client, ContextdError, StatusCode
from contextd.client_base import SESSION_RPCS
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


class BothClients(unittest.TestCase):
    def each_kind(self, scenario: Callable[[str], Awaitable[Any]]) -> None:
        """Runs `scenario(kind)` in an event loop of its own, once per client kind."""
        for kind in KINDS:
            with self.subTest(client=kind):
                asyncio.run(scenario(kind))


class ClientOptionsTest(BothClients):
    def test_defaults(self) -> None:
        async def scenario(kind: str) -> None:
            async with open_client(kind) as cx:
                self.assertEqual(cx.address, "127.0.0.1:50051")
                self.assertEqual(cx.timeout, 30.0)
            async with open_client(kind, "127.0.0.1:1", timeout=None) as cx:
                self.assertIsNone(cx.timeout)

        self.each_kind(scenario)

    def test_a_timeout_must_be_a_positive_number_of_seconds(self) -> None:
        async def scenario(kind: str) -> None:
            for bad in (0, -1, float("nan"), float("inf"), "5", True):
                with self.subTest(timeout=bad), self.assertRaisesRegex(ValueError, "timeout must be a positive number"):
                    open_client(kind, "127.0.0.1:1", timeout=bad)
            async with open_client(kind, "127.0.0.1:1") as cx:
                with self.assertRaisesRegex(ValueError, "Assemble: timeout must be a positive"):
                    await cx.assemble(session="s", token_budget=1, timeout=0)

        self.each_kind(scenario)

    def test_a_bad_token_is_refused_at_construction(self) -> None:
        async def scenario(kind: str) -> None:
            with self.assertRaisesRegex(ValueError, "not a valid bearer token"):
                open_client(kind, "127.0.0.1:1", token="from-a-file\n")

        self.each_kind(scenario)

    def test_argument_errors_are_raised_before_anything_is_sent(self) -> None:
        async def scenario(kind: str) -> None:
            # Against a closed port: any call that went out would fail UNAVAILABLE instead.
            async with open_client(kind, "127.0.0.1:%d" % closed_port()) as cx:
                with self.assertRaisesRegex(TypeError, r"assemble\(\) got an unknown field 'budget'"):
                    await cx.assemble(session="s", budget=1)
                with self.assertRaisesRegex(TypeError, r"get_session\(\) takes a GetSessionRequest"):
                    await cx.get_session(S.AssembleRequest())
                with self.assertRaisesRegex(TypeError, "^session: "):
                    await anext(cx.transcript(42))

        self.each_kind(scenario)


class CallFailuresTest(BothClients):
    def test_a_refused_connection_is_unavailable_naming_the_rpc(self) -> None:
        async def scenario(kind: str) -> None:
            async with open_client(kind, "127.0.0.1:%d" % closed_port(), timeout=10) as cx:
                with self.assertRaises(ContextdError) as caught:
                    await cx.get_session(session="s")
            self.assertIs(caught.exception.code, StatusCode.UNAVAILABLE)
            self.assertEqual(caught.exception.method, "GetSession")
            self.assertTrue(str(caught.exception).startswith("GetSession: UNAVAILABLE: "))

        self.each_kind(scenario)

    def test_the_client_deadline_bounds_a_silent_peer(self) -> None:
        async def scenario(kind: str) -> None:
            with SilentPeer() as address:
                async with open_client(kind, address, timeout=0.3) as cx:
                    started = time.monotonic()
                    with self.assertRaises(ContextdError) as caught:
                        await cx.assemble(session="s", token_budget=100)
                    elapsed = time.monotonic() - started
            self.assertIs(caught.exception.code, StatusCode.DEADLINE_EXCEEDED)
            self.assertEqual(caught.exception.method, "Assemble")
            self.assertLess(elapsed, 5.0)

        self.each_kind(scenario)

    def test_a_call_timeout_overrides_the_client_one(self) -> None:
        async def scenario(kind: str) -> None:
            with SilentPeer() as address:
                async with open_client(kind, address, timeout=600) as cx:
                    started = time.monotonic()
                    with self.assertRaises(ContextdError) as caught:
                        await cx.list_sessions(timeout=0.3)
                    self.assertIs(caught.exception.code, StatusCode.DEADLINE_EXCEEDED)
                    self.assertLess(time.monotonic() - started, 5.0)

        self.each_kind(scenario)

    def test_wait_ready_fails_fast_on_a_wrong_address(self) -> None:
        async def scenario(kind: str) -> None:
            with SilentPeer() as address:
                async with open_client(kind, address) as cx:
                    with self.assertRaises(ContextdError) as caught:
                        await cx.wait_ready(timeout=0.3)
            self.assertIs(caught.exception.code, StatusCode.UNAVAILABLE)
            self.assertIn("not connected to " + address, caught.exception.message)

        self.each_kind(scenario)


class SameSurfaceTest(unittest.TestCase):
    """AsyncClient is Client with `async def` methods: the same names and signatures."""

    @staticmethod
    def public(cls: type) -> dict[str, Any]:
        return {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}

    def test_the_same_methods_with_the_same_signatures(self) -> None:
        sync, aio = self.public(Client), self.public(AsyncClient)
        self.assertEqual(sorted(sync), sorted(aio))
        for name in sync:
            with self.subTest(method=name):
                # The answers differ by design (a coroutine, an async iterator); the arguments may not.
                self.assertEqual(inspect.signature(sync[name]).parameters, inspect.signature(aio[name]).parameters)
                if name in SESSION_RPCS:
                    self.assertEqual(inspect.getdoc(sync[name]), inspect.getdoc(aio[name]))

    def test_every_rpc_is_a_coroutine_function_on_asyncclient_and_a_plain_one_on_client(self) -> None:
        # Every SessionService RPC, as the proto declares it, is a method of both.
        service = S.DESCRIPTOR.services_by_name["SessionService"]
        self.assertEqual(sorted(r.rpc for r in SESSION_RPCS.values()), sorted(m.name for m in service.methods))
        for method in service.methods:
            rpc = next(r for r in SESSION_RPCS.values() if r.rpc == method.name)
            self.assertEqual((rpc.request.DESCRIPTOR, rpc.response.DESCRIPTOR), (method.input_type, method.output_type), method.name)
        for name in [*SESSION_RPCS, "health", "wait_ready", "close"]:
            with self.subTest(method=name):
                self.assertTrue(inspect.iscoroutinefunction(getattr(AsyncClient, name)))
                self.assertFalse(inspect.iscoroutinefunction(getattr(Client, name)))
        for name in ("transcript", "search"):
            self.assertTrue(inspect.isasyncgenfunction(getattr(AsyncClient, name)))
            self.assertTrue(inspect.isgeneratorfunction(getattr(Client, name)))

    def test_concurrent_calls_from_one_loop_share_the_deadline_not_a_queue(self) -> None:
        # 20 calls to a silent peer, each with a 0.5 s deadline: awaited together they all end by
        # their deadline at about the same time; were they sent one after another it would take 10 s.
        async def scenario() -> float:
            with SilentPeer() as address:
                async with AsyncClient(address, timeout=0.5) as cx:
                    started = time.monotonic()
                    outcomes = await asyncio.gather(*(cx.get_session(session=f"s{i}") for i in range(20)), return_exceptions=True)
                    elapsed = time.monotonic() - started
            codes = {o.code for o in outcomes if isinstance(o, ContextdError)}
            self.assertEqual(codes, {StatusCode.DEADLINE_EXCEEDED}, outcomes)
            return elapsed

        self.assertLess(asyncio.run(scenario()), 3.0)


if __name__ == "__main__":
    unittest.main()
