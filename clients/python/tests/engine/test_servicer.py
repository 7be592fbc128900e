"""ContextEngineService over an Engine, served in process over real gRPC: answers converted to the
response type, errors mapped to statuses, UNIMPLEMENTED and defaults for optional RPCs, and the
CallContext (method, metadata, deadline, cancellation)."""

from __future__ import annotations

import asyncio
import threading
import time
import unittest

import grpc

from contextd.engine import CallContext, EngineError
from contextd.health.v1 import health_pb2, health_pb2_grpc
from contextd.v1 import engine_pb2, engine_pb2_grpc, types_pb2

from .support import EngineTestCase, message, minimal, wait_for

USER, ASSISTANT = types_pb2.ROLE_USER, types_pb2.ROLE_ASSISTANT


class ServicerTest(EngineTestCase):
    def stub(self, engine, **options):
        running, logs = self.serve(engine, **options)
        return engine_pb2_grpc.ContextEngineServiceStub(self.channel(running.address)), running, logs

    def error(self, call, *args, **kwargs) -> grpc.RpcError:
        with self.assertRaises(grpc.RpcError) as cm:
            call(*args, **kwargs)
        return cm.exception

    def test_get_info(self):
        stub, running, _ = self.stub(minimal(after_turn=lambda r, c: None, dispose=lambda r, c: None))
        info = stub.GetInfo(engine_pb2.GetInfoRequest(), timeout=5).info
        self.assertEqual(info, running.info)
        self.assertTrue(info.capabilities.after_turn and info.capabilities.dispose)
        self.assertRegex(running.address, r"^127\.0\.0\.1:\d+$")
        self.assertNotEqual(running.address, "127.0.0.1:0")
        self.assertEqual(running.endpoint, running.address)

    def test_forget_session_reaches_the_engine_and_its_answer_comes_back(self):
        heard: list = []

        def forget(req, ctx: CallContext):
            heard.append((req.session.session_id, req.reason, req.deleted_at_ms))
            return {"purged": True}

        stub, running, _ = self.stub(minimal(forget_session=forget))
        self.assertTrue(running.info.capabilities.forget)
        req = engine_pb2.ForgetSessionRequest(session=types_pb2.SessionRef(session_id="gone"), reason=engine_pb2.FORGET_REASON_RETENTION_IDLE, deleted_at_ms=42)
        self.assertTrue(stub.ForgetSession(req, timeout=5).purged)
        self.assertEqual(heard, [("gone", engine_pb2.FORGET_REASON_RETENTION_IDLE, 42)])
        # Not declared: UNIMPLEMENTED.
        bare, _, _ = self.stub(minimal())
        self.assertEqual(self.error(bare.ForgetSession, req, timeout=5).code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_assemble_round_trip_and_estimated_tokens_default(self):
        seen: dict = {}

        def assemble(req, ctx: CallContext):
            seen["req"], seen["ctx"] = req, ctx
            return {"messages": req.messages[-1:], "system_prompt_addition": f"budget {req.token_budget}"}

        stub, _, _ = self.stub(minimal(assemble=assemble))
        msgs = [message(USER, "first", 5, "e1"), message(ASSISTANT, "second", 7, "e2")]
        req = engine_pb2.ContextEngineServiceAssembleRequest(session=types_pb2.SessionRef(session_id="s1"), messages=msgs, token_budget=100)
        res = stub.Assemble(req, timeout=5, metadata=(("x-request-id", "req-1"), ("traceparent", "00-abc-def-01")))
        self.assertEqual([m.id for m in res.messages], ["e2"])
        self.assertEqual(res.estimated_tokens, 7)
        self.assertEqual(res.system_prompt_addition, "budget 100")
        ctx = seen["ctx"]
        self.assertEqual(ctx.method, "Assemble")
        self.assertEqual(ctx.request_id, "req-1")
        self.assertEqual(ctx.metadata.get("traceparent"), "00-abc-def-01")
        self.assertIsNone(ctx.host)
        self.assertGreater(ctx.deadline, time.time())
        self.assertLessEqual(ctx.time_remaining(), 5.5)  # grpc-timeout encoding rounds up a little
        self.assertFalse(ctx.cancelled.is_set())
        self.assertEqual(seen["req"].session.session_id, "s1")

    def test_without_a_deadline(self):
        seen: dict = {}

        def assemble(req, ctx: CallContext):
            seen["deadline"], seen["remaining"] = ctx.deadline, ctx.time_remaining()
            return {}

        stub, _, _ = self.stub(minimal(assemble=assemble))
        stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest())
        self.assertEqual(seen, {"deadline": None, "remaining": None})

    def test_answers_as_a_proto_a_dict_or_none(self):
        answers = iter(
            [
                engine_pb2.ContextEngineServiceAssembleResponse(estimated_tokens=3),
                {"messages": [{"id": "d1", "token_count": 4}], "estimated_tokens": 0},
                None,
            ]
        )
        stub, _, _ = self.stub(minimal(assemble=lambda r, c: next(answers)))
        req = engine_pb2.ContextEngineServiceAssembleRequest()
        self.assertEqual(stub.Assemble(req, timeout=5).estimated_tokens, 3)
        res = stub.Assemble(req, timeout=5)
        self.assertEqual(([m.id for m in res.messages], res.estimated_tokens), (["d1"], 0))  # an explicit 0 stays
        self.assertEqual(stub.Assemble(req, timeout=5), engine_pb2.ContextEngineServiceAssembleResponse())

    def test_a_wrong_answer_is_internal_naming_the_method(self):
        answers = iter([{"no_such_field": 1}, "text", engine_pb2.IngestResponse()])
        stub, _, logs = self.stub(minimal(assemble=lambda r, c: next(answers)))
        for expected in ("has no \"no_such_field\" field", "returned a str", "returned a IngestResponse"):
            err = self.error(stub.Assemble, engine_pb2.ContextEngineServiceAssembleRequest(), timeout=5)
            self.assertEqual(err.code(), grpc.StatusCode.INTERNAL)
            self.assertIn("assemble()", err.details())
            self.assertIn(expected, err.details())
        failed = logs.wait_for(lambda line: line["msg"] == "assemble() failed")
        self.assertEqual((failed["level"], failed["rpc"], failed["engine"]), ("error", "Assemble", "test-engine"))
        self.assertEqual(failed["err"]["type"], "TypeError")

    def test_errors(self):
        def compact(req, ctx):
            if req.force:
                raise EngineError(grpc.StatusCode.FAILED_PRECONDITION, "not now")
            raise KeyError("boom")

        stub, _, logs = self.stub(minimal(compact=compact))
        err = self.error(stub.Compact, engine_pb2.ContextEngineServiceCompactRequest(force=True), timeout=5)
        self.assertEqual((err.code(), err.details()), (grpc.StatusCode.FAILED_PRECONDITION, "not now"))
        warned = logs.wait_for(lambda line: line["msg"] == "compact() answered an error")
        self.assertEqual((warned["level"], warned["code"], warned["reason"]), ("warn", "FAILED_PRECONDITION", "not now"))
        err = self.error(stub.Compact, engine_pb2.ContextEngineServiceCompactRequest(), timeout=5)
        self.assertEqual((err.code(), err.details()), (grpc.StatusCode.INTERNAL, "internal error: 'boom'"))

    def test_any_error_with_a_status_code_keeps_it(self):
        class LikeContextdError(Exception):
            def __init__(self):
                super().__init__("no such session")
                self.code = grpc.StatusCode.NOT_FOUND
                self.message = "no such session"

        stub, _, _ = self.stub(minimal(compact=lambda r, c: (_ for _ in ()).throw(LikeContextdError())))
        err = self.error(stub.Compact, engine_pb2.ContextEngineServiceCompactRequest(), timeout=5)
        self.assertEqual((err.code(), err.details()), (grpc.StatusCode.NOT_FOUND, "no such session"))

    def test_unimplemented_and_defaults(self):
        stub, _, _ = self.stub(minimal())
        calls = {
            "Bootstrap": engine_pb2.BootstrapRequest(),
            "IngestBatch": engine_pb2.IngestBatchRequest(),
            "AfterTurn": engine_pb2.ContextEngineServiceAfterTurnRequest(),
            "Maintain": engine_pb2.ContextEngineServiceMaintainRequest(),
            "PrepareSubagentSpawn": engine_pb2.ContextEngineServicePrepareSubagentSpawnRequest(),
            "RollbackSubagentSpawn": engine_pb2.ContextEngineServiceRollbackSubagentSpawnRequest(),
            "OnSubagentEnded": engine_pb2.OnSubagentEndedRequest(),
            "Dispose": engine_pb2.DisposeRequest(),
        }
        for rpc, req in calls.items():
            err = self.error(getattr(stub, rpc), req, timeout=5)
            self.assertEqual(err.code(), grpc.StatusCode.UNIMPLEMENTED, rpc)
            self.assertEqual(err.details(), f'engine "test-engine" does not implement {rpc}')
        self.assertTrue(stub.Ingest(engine_pb2.IngestRequest(), timeout=5).ingested)

    def test_partial_subagent_support_answers_empty_for_the_rest(self):
        stub, _, _ = self.stub(minimal(prepare_subagent_spawn=lambda r, c: {"rollback_handle": f"h-{r.child.session_id}"}))
        req = engine_pb2.ContextEngineServicePrepareSubagentSpawnRequest(child=types_pb2.SessionRef(session_id="kid"))
        self.assertEqual(stub.PrepareSubagentSpawn(req, timeout=5).rollback_handle, "h-kid")
        stub.RollbackSubagentSpawn(engine_pb2.ContextEngineServiceRollbackSubagentSpawnRequest(), timeout=5)
        stub.OnSubagentEnded(engine_pb2.OnSubagentEndedRequest(), timeout=5)

    def test_over_budget_answers_are_logged(self):
        stub, _, logs = self.stub(minimal())
        req = engine_pb2.ContextEngineServiceAssembleRequest(messages=[message(USER, "x", 50, "e1")], token_budget=10)
        self.assertEqual(stub.Assemble(req, timeout=5).estimated_tokens, 50)
        line = logs.wait_for(lambda line: "over the token budget" in line["msg"])
        self.assertEqual((line["estimated_tokens"], line["token_budget"]), (50, 10))

    def hanging(self):
        started, seen = threading.Event(), {}

        def assemble(req, ctx: CallContext):
            seen["ctx"] = ctx
            started.set()
            seen["cancelled"] = ctx.cancelled.wait(10)
            seen["remaining"] = ctx.time_remaining()
            ctx.raise_if_cancelled()
            return {}

        return minimal(assemble=assemble), started, seen

    def test_the_deadline_reaches_the_method_as_cancellation(self):
        engine, _, seen = self.hanging()
        stub, _, logs = self.stub(engine)
        began = time.monotonic()
        err = self.error(stub.Assemble, engine_pb2.ContextEngineServiceAssembleRequest(), timeout=0.4)
        self.assertEqual(err.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        logs.wait_for(lambda line: line["msg"] == "call ended by the caller" and line["code"] == "DEADLINE_EXCEEDED")
        # On grpc.aio the call's end is logged as it happens, before the method has seen it.
        self.assertTrue(wait_for(lambda: "remaining" in seen))
        self.assertTrue(seen["cancelled"])
        self.assertEqual(seen["remaining"], 0.0)
        self.assertLess(time.monotonic() - began, 3.0)

    def test_the_callers_cancellation_reaches_the_method(self):
        engine, started, seen = self.hanging()
        stub, _, logs = self.stub(engine)
        call = stub.Assemble.future(engine_pb2.ContextEngineServiceAssembleRequest(), timeout=30)
        self.assertTrue(started.wait(5))
        hooked = threading.Event()
        seen["ctx"].on_cancel(hooked.set)
        call.cancel()
        self.assertTrue(hooked.wait(5), "on_cancel hook did not run")
        logs.wait_for(lambda line: line["msg"] == "call ended by the caller" and line["code"] == "CANCELLED")
        self.assertTrue(wait_for(lambda: "remaining" in seen))
        self.assertTrue(seen["cancelled"])
        self.assertGreater(seen["remaining"], 1.0)

    def test_health(self):
        running, _ = self.serve(minimal())
        stub = health_pb2_grpc.HealthStub(self.channel(running.address))
        for service in ("", "contextd.v1.ContextEngineService"):
            self.assertEqual(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status, health_pb2.HealthCheckResponse.SERVING)
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        statuses = stub.List(health_pb2.HealthListRequest(), timeout=5).statuses
        self.assertEqual(set(statuses), {"", "contextd.v1.ContextEngineService"})
        stream = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        try:
            self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.SERVING)
            running.set_health(False)
            self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.NOT_SERVING)
            running.set_health(True)
            self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.SERVING)
        finally:
            stream.cancel()


class AsyncServicerTest(ServicerTest):
    """Every scenario above against the engine's methods as `async def`, served on grpc.aio."""

    asynchronous = True

    def test_the_engine_is_served_on_grpc_aio(self):
        _, running, logs = self.stub(minimal())
        self.assertIsNotNone(running.loop)
        self.assertEqual(logs.wait_for(lambda line: line["msg"] == "engine listening")["server"], "grpc.aio")

    def test_an_async_method_is_cancelled_at_its_await_and_the_cause_is_known_by_then(self):
        seen: dict = {}

        async def assemble(req, ctx: CallContext):
            try:
                await asyncio.Event().wait()  # never set: only the call's end stops it
            except asyncio.CancelledError:
                seen["cause"], seen["cancelled"], seen["remaining"] = ctx.cancel_cause, ctx.cancelled.is_set(), ctx.time_remaining()
                raise

        stub, running, logs = self.stub(minimal(assemble=assemble))
        err = self.error(stub.Assemble, engine_pb2.ContextEngineServiceAssembleRequest(), timeout=0.4)
        self.assertEqual(err.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertTrue(wait_for(lambda: seen))
        self.assertEqual(seen, {"cause": "deadline", "cancelled": True, "remaining": 0.0})
        self.assertTrue(wait_for(lambda: running._servicer.inflight == 0))

    def test_one_loop_serves_many_calls_while_one_method_awaits(self):
        # A method that waits until 20 others have been answered: served one at a time, it never would.
        answered, release = 0, asyncio.Event()

        async def assemble(req, ctx: CallContext):
            nonlocal answered
            if req.session.session_id == "waiter":
                await release.wait()
                return {"system_prompt_addition": f"released after {answered}"}
            answered += 1
            if answered == 20:
                release.set()
            return {}

        stub, _, _ = self.stub(minimal(assemble=assemble), max_workers=1)
        waiter = stub.Assemble.future(engine_pb2.ContextEngineServiceAssembleRequest(session=types_pb2.SessionRef(session_id="waiter")), timeout=10)
        others = [stub.Assemble.future(engine_pb2.ContextEngineServiceAssembleRequest(), timeout=10) for _ in range(20)]
        self.assertEqual([o.result().estimated_tokens for o in others], [0] * 20)
        self.assertEqual(waiter.result().system_prompt_addition, "released after 20")

    def test_a_mixed_engine_runs_its_plain_methods_in_worker_threads(self):
        loop_threads: list = []

        async def assemble(req, ctx):
            loop_threads.append(threading.current_thread().name)
            return {}

        def compact(req, ctx):
            return {"ok": True, "reason": threading.current_thread().name}

        engine = minimal(assemble=assemble, compact=compact)
        stub, _, _ = self.stub(engine)
        stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest(), timeout=5)
        self.assertEqual(loop_threads, ["test-engine-loop"])
        self.assertRegex(stub.Compact(engine_pb2.ContextEngineServiceCompactRequest(), timeout=5).reason, r"^test-engine-rpc")


if __name__ == "__main__":
    unittest.main()
