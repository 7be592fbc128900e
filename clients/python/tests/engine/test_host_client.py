"""HostClient and delegate_compaction_to_host against a HostService served in process: credentials
and trace context, the session default, deadlines bounded by the call and the HostContext,
cancellation with the engine call, errors passed on with the host's status."""

from __future__ import annotations

import asyncio
import threading
import time
import unittest

import grpc

from contextd.engine import CallContext, EngineError, delegate_compaction_to_host
from contextd.engine.host_client import AsyncHostClient
from contextd.v1 import engine_pb2, engine_pb2_grpc, host_pb2, host_pb2_grpc, types_pb2

from .support import EngineTestCase, minimal, serve_in_process, wait_for


class FakeHost(host_pb2_grpc.HostServiceServicer):
    """Records what it was sent; `mode` makes it answer, fail or hang until cancelled."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object, dict, float | None]] = []
        self.mode = "ok"
        self.cancelled = threading.Event()
        self.pages = 3

    def _record(self, rpc, request, context):
        self.calls.append((rpc, request, dict(context.invocation_metadata()), context.time_remaining()))
        if self.mode == "hang":
            while context.is_active():
                time.sleep(0.01)
            self.cancelled.set()
        elif self.mode == "fail":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no can do")

    def ReadTranscript(self, request, context):
        self._record("ReadTranscript", request, context)
        page = int(request.page_token or "0")
        entries = [types_pb2.TranscriptEntry(id=f"p{page}-{i}") for i in range(2)]
        return host_pb2.ReadTranscriptResponse(entries=entries, next_page_token=str(page + 1) if page + 1 < self.pages else "")

    def RewriteTranscriptEntries(self, request, context):
        self._record("RewriteTranscriptEntries", request, context)
        return host_pb2.RewriteTranscriptEntriesResponse(rewritten_entries=len(request.rewrites))

    def DelegateCompaction(self, request, context):
        self._record("DelegateCompaction", request, context)
        return host_pb2.DelegateCompactionResponse(
            ok=True,
            compacted=True,
            reason="compacted by the host",
            result=types_pb2.CompactionResult(summary="the summary", first_kept_entry_id="e7", tokens_before=1000, tokens_after=100),
        )

    def Complete(self, request, context):
        self._record("Complete", request, context)
        return host_pb2.CompleteResponse(text=f"{request.system}: {len(request.messages)}")


class HostClientTest(EngineTestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FakeHost()
        cls.host_server, cls.host_address = serve_in_process(lambda s: host_pb2_grpc.add_HostServiceServicer_to_server(cls.host, s))

    @classmethod
    def tearDownClass(cls):
        cls.host_server.stop(0).wait()

    def setUp(self):
        self.host.calls.clear()
        self.host.mode = "ok"
        self.host.cancelled.clear()

    def host_context(self, expires_in: float = 60.0) -> types_pb2.HostContext:
        return types_pb2.HostContext(endpoint=self.host_address, token="host-token", expires_at_ms=int((time.time() + expires_in) * 1000))

    def compact_request(self, expires_in: float = 60.0, **fields) -> engine_pb2.ContextEngineServiceCompactRequest:
        values = dict(
            session=types_pb2.SessionRef(session_id="s1", agent_id="a"),
            token_budget=32000,
            force=True,
            current_token_count=1234,
            compaction_target=types_pb2.COMPACTION_TARGET_THRESHOLD,
            custom_instructions="keep the file paths",
            host=self.host_context(expires_in),
        )
        values.update(fields)
        return engine_pb2.ContextEngineServiceCompactRequest(**values)

    def compact_stub(self, compact=delegate_compaction_to_host):
        running, logs = self.serve(minimal(compact=compact))
        return engine_pb2_grpc.ContextEngineServiceStub(self.channel(running.address)), logs

    def test_delegate_compaction_to_host(self):
        stub, logs = self.compact_stub()
        res = stub.Compact(self.compact_request(), timeout=10, metadata=(("traceparent", "00-trace-span-01"),))
        self.assertEqual((res.ok, res.compacted, res.reason), (True, True, "compacted by the host"))
        self.assertEqual((res.result.summary, res.result.first_kept_entry_id), ("the summary", "e7"))
        [(rpc, req, metadata, remaining)] = self.host.calls
        self.assertEqual(rpc, "DelegateCompaction")
        self.assertEqual(metadata.get("authorization"), "Bearer host-token")
        self.assertEqual(metadata.get("traceparent"), "00-trace-span-01")
        self.assertEqual((req.session.session_id, req.session.agent_id), ("s1", "a"))
        self.assertEqual((req.token_budget, req.force, req.current_token_count), (32000, True, 1234))
        self.assertEqual(req.compaction_target, types_pb2.COMPACTION_TARGET_THRESHOLD)
        self.assertEqual(req.custom_instructions, "keep the file paths")
        # Bounded by the Compact call's own deadline (10 s), not only by the HostContext (60 s).
        self.assertLessEqual(remaining, 10.5)
        answered = logs.wait_for(lambda line: line["msg"] == "delegated compaction answered")
        self.assertEqual((answered["compacted"], answered["tokens_after"], answered["rpc"]), (True, 100, "Compact"))

    def test_bounded_by_the_host_context_expiry(self):
        stub, _ = self.compact_stub()
        stub.Compact(self.compact_request(expires_in=2.0), timeout=30)
        self.assertLessEqual(self.host.calls[0][3], 2.5)

    def test_an_expired_host_context_is_not_sent(self):
        stub, _ = self.compact_stub()
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Compact(self.compact_request(expires_in=-1.0), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIn("HostService.DelegateCompaction: not sent: the HostContext has expired", cm.exception.details())
        self.assertEqual(self.host.calls, [])

    def test_without_a_host_context(self):
        stub, _ = self.compact_stub()
        req = self.compact_request()
        req.ClearField("host")
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Compact(req, timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("no HostContext", cm.exception.details())

    def test_the_hosts_error_is_passed_on(self):
        self.host.mode = "fail"
        stub, _ = self.compact_stub()
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Compact(self.compact_request(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(cm.exception.details(), "HostService.DelegateCompaction: no can do")

    def test_the_deadline_cancels_the_host_call(self):
        self.host.mode = "hang"
        stub, _ = self.compact_stub()
        began = time.monotonic()
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Compact(self.compact_request(), timeout=0.5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertTrue(self.host.cancelled.wait(3.0), "the host call was not cancelled")
        self.assertLess(time.monotonic() - began, 3.0)

    def test_cancellation_cancels_the_host_call(self):
        self.host.mode = "hang"
        errors: list[EngineError] = []

        def compact(req, ctx):
            try:
                return delegate_compaction_to_host(req, ctx)
            except EngineError as err:
                errors.append(err)
                raise

        self.cancel_while_the_host_call_hangs(compact, errors)
        self.assertEqual(errors[0].code, grpc.StatusCode.CANCELLED)

    def cancel_while_the_host_call_hangs(self, compact, outcomes: list) -> None:
        """Cancels a Compact whose host call hangs; the host call is cancelled, `compact` records how it ended."""
        stub, _ = self.compact_stub(compact)
        call = stub.Compact.future(self.compact_request(), timeout=30)
        self.assertTrue(wait_for(lambda: len(self.host.calls) == 1))
        call.cancel()
        self.assertTrue(self.host.cancelled.wait(3.0), "the host call was not cancelled")
        self.assertTrue(wait_for(lambda: outcomes))

    def test_every_host_rpc_with_the_session_default(self):
        seen: dict = {}

        def assemble(req, ctx: CallContext):
            host = ctx.host
            seen["endpoint"] = host.endpoint
            seen["entries"] = [e.id for e in host.read_whole_transcript(page_size=2)]
            seen["page"] = host.read_transcript(page_token="2", active_only=True).next_page_token
            rewrite = host_pb2.RewriteTranscriptEntriesRequest(rewrites=[host_pb2.EntryRewrite(entry_id="e1")], reason="shorter")
            seen["rewritten"] = host.rewrite_transcript_entries(rewrite).rewritten_entries
            seen["completion"] = host.complete(system="summarize", messages=[types_pb2.Message(id="m")], max_tokens=5, timeout=3).text
            return {}

        self.check_every_host_rpc(assemble, seen)

    def check_every_host_rpc(self, assemble, seen: dict) -> None:
        running, _ = self.serve(minimal(assemble=assemble))
        stub = engine_pb2_grpc.ContextEngineServiceStub(self.channel(running.address))
        session = types_pb2.SessionRef(session_id="s9", agent_id="coder")
        stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest(session=session, host=self.host_context()), timeout=10)
        self.assertEqual(seen["endpoint"], self.host_address)
        self.assertEqual(seen["entries"], ["p0-0", "p0-1", "p1-0", "p1-1", "p2-0", "p2-1"])
        self.assertEqual((seen["page"], seen["rewritten"], seen["completion"]), ("", 1, "summarize: 1"))
        rpcs = [c[0] for c in self.host.calls]
        self.assertEqual(rpcs, ["ReadTranscript"] * 4 + ["RewriteTranscriptEntries", "Complete"])
        for rpc, req, metadata, _ in self.host.calls:
            self.assertEqual((req.session.session_id, req.session.agent_id), ("s9", "coder"), rpc)
            self.assertEqual(metadata["authorization"], "Bearer host-token")
        self.assertTrue(self.host.calls[3][1].active_only)
        self.assertLessEqual(self.host.calls[-1][3], 3.5)  # timeout=3 bounds it below the call's 10 s


class AsyncHostClientTest(HostClientTest):
    """The scenarios above with the engine served on grpc.aio: delegate_compaction_to_host (a plain
    def) in a worker thread beside `async def` methods, and the methods that call ctx.host
    themselves as `async def`s awaiting an AsyncHostClient."""

    asynchronous = True

    def test_cancellation_cancels_the_host_call(self):
        self.host.mode = "hang"
        ended: list[str] = []

        async def compact(req, ctx):
            self.assertIsInstance(ctx.host, AsyncHostClient)
            try:
                return await ctx.host.delegate_compaction(session=req.session, token_budget=req.token_budget)
            except asyncio.CancelledError:
                ended.append(ctx.cancel_cause)
                raise

        self.cancel_while_the_host_call_hangs(compact, ended)
        self.assertEqual(ended, ["cancelled"])

    def test_every_host_rpc_with_the_session_default(self):
        seen: dict = {}

        async def assemble(req, ctx: CallContext):
            host = ctx.host
            seen["endpoint"] = host.endpoint
            seen["entries"] = [e.id for e in await host.read_whole_transcript(page_size=2)]
            seen["page"] = (await host.read_transcript(page_token="2", active_only=True)).next_page_token
            rewrite = host_pb2.RewriteTranscriptEntriesRequest(rewrites=[host_pb2.EntryRewrite(entry_id="e1")], reason="shorter")
            seen["rewritten"] = (await host.rewrite_transcript_entries(rewrite)).rewritten_entries
            seen["completion"] = (await host.complete(system="summarize", messages=[types_pb2.Message(id="m")], max_tokens=5, timeout=3)).text
            return {}

        self.check_every_host_rpc(assemble, seen)


if __name__ == "__main__":
    unittest.main()
