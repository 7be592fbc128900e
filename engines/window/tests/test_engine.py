"""The window engine's services over real gRPC, in process: GetInfo, Assemble, Compact delegating to
a fake HostService (metadata, deadline, cancellation, errors), health, and the Registrar against a
fake RegistryService (retry while unreachable, heartbeat re-registration after NOT_FOUND, leaving
the id to another instance that took it over, deregistration).

    /usr/bin/python3 -m unittest discover -s engines/window/tests -t engines/window
"""

import io
import json
import socket
import threading
import time
import unittest
from concurrent import futures

from .helpers import summary, turn, types_pb2, user

import grpc  # noqa: E402

from contextd.v1 import engine_pb2, engine_pb2_grpc, host_pb2, host_pb2_grpc, registry_pb2, registry_pb2_grpc  # noqa: E402
from health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from host_client import HostClient  # noqa: E402
from jsonlog import JsonLogger  # noqa: E402
from registration import Registrar  # noqa: E402
from window_engine import Health, WindowEngine  # noqa: E402


def quiet_log():
    return JsonLogger(stream=io.StringIO(), level="debug")


def serve(add, port=0):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[("grpc.so_reuseport", 0)])
    add(server)
    bound = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    return server, "127.0.0.1:%d" % bound


def wait_for(pred, timeout=5.0, every=0.02):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if pred():
            return True
        time.sleep(every)
    return pred()


class FakeHost(host_pb2_grpc.HostServiceServicer):
    def __init__(self):
        self.calls = []  # (request, metadata dict, time_remaining)
        self.mode = "ok"
        self.cancelled = threading.Event()

    def DelegateCompaction(self, request, context):
        self.calls.append((request, dict(context.invocation_metadata()), context.time_remaining()))
        if self.mode == "hang":
            while context.is_active():
                time.sleep(0.01)
            self.cancelled.set()
            return host_pb2.DelegateCompactionResponse()
        if self.mode == "fail":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no can do")
        return host_pb2.DelegateCompactionResponse(
            ok=True,
            compacted=True,
            reason="compacted by the host",
            result=types_pb2.CompactionResult(summary="the summary", first_kept_entry_id="e7", tokens_before=1000, tokens_after=100),
        )


class EngineOverGrpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FakeHost()
        cls.host_server, cls.host_address = serve(lambda s: host_pb2_grpc.add_HostServiceServicer_to_server(cls.host, s))
        cls.health = Health()
        cls.host_client = HostClient()
        engine = WindowEngine(quiet_log(), cls.host_client)

        def add(s):
            engine_pb2_grpc.add_ContextEngineServiceServicer_to_server(engine, s)
            health_pb2_grpc.add_HealthServicer_to_server(cls.health, s)

        cls.server, cls.address = serve(add)
        cls.channel = grpc.insecure_channel(cls.address)
        cls.stub = engine_pb2_grpc.ContextEngineServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.host_client.close()
        cls.server.stop(0).wait()
        cls.host_server.stop(0).wait()

    def setUp(self):
        self.host.calls.clear()
        self.host.mode = "ok"
        self.host.cancelled.clear()

    def compact_request(self, expires_in_s=60.0, **kw):
        fields = dict(
            session=types_pb2.SessionRef(session_id="s1", agent_id="a"),
            token_budget=32000,
            force=True,
            current_token_count=1234,
            compaction_target=types_pb2.COMPACTION_TARGET_THRESHOLD,
            custom_instructions="keep the file paths",
            host=types_pb2.HostContext(endpoint=self.host_address, token="host-token", expires_at_ms=int((time.time() + expires_in_s) * 1000)),
        )
        fields.update(kw)
        return engine_pb2.ContextEngineServiceCompactRequest(**fields)

    def test_get_info(self):
        info = self.stub.GetInfo(engine_pb2.GetInfoRequest(), timeout=5).info
        self.assertEqual(info.id, "window")
        self.assertTrue(info.name)
        self.assertTrue(info.version)
        self.assertFalse(info.owns_compaction)
        self.assertTrue(info.capabilities.ingest_batch)
        self.assertEqual(list(info.host_requirements), ["host-compaction"])
        self.assertEqual(list(info.protocol_versions), [1])

    def test_assemble(self):
        s = summary(tokens=50)
        view = [s] + turn(0) + turn(1) + turn(2)
        res = self.stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest(messages=view, token_budget=130), timeout=5)
        self.assertEqual([m.id for m in res.messages], [s.id] + [m.id for m in view[-8:]])
        self.assertEqual(res.estimated_tokens, 130)
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_ASSEMBLED)

    def test_assemble_without_a_budget_uses_the_runtime_budget_or_everything(self):
        view = turn(0) + turn(1)
        res = self.stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest(messages=view), timeout=5)
        self.assertEqual(len(res.messages), len(view))
        req = engine_pb2.ContextEngineServiceAssembleRequest(messages=view)
        req.runtime_settings.limits.prompt_token_budget = 40
        res = self.stub.Assemble(req, timeout=5)
        self.assertEqual([m.id for m in res.messages], [m.id for m in view[-4:]])

    def test_assemble_overflow(self):
        view = [summary(tokens=80), user("big", 50)]
        res = self.stub.Assemble(engine_pb2.ContextEngineServiceAssembleRequest(messages=view, token_budget=100), timeout=5)
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW)
        self.assertEqual(res.estimated_tokens, 130)

    def test_ingest(self):
        self.assertTrue(self.stub.Ingest(engine_pb2.IngestRequest(message=user("x")), timeout=5).ingested)
        res = self.stub.IngestBatch(engine_pb2.IngestBatchRequest(messages=[user("x"), user("y")]), timeout=5)
        self.assertEqual(res.ingested_count, 2)

    def test_compact_delegates_to_the_host(self):
        res = self.stub.Compact(self.compact_request(), timeout=10)
        self.assertTrue(res.ok)
        self.assertTrue(res.compacted)
        self.assertEqual(res.reason, "compacted by the host")
        self.assertEqual(res.result.summary, "the summary")
        self.assertEqual(res.result.first_kept_entry_id, "e7")
        self.assertEqual(len(self.host.calls), 1)
        req, metadata, remaining = self.host.calls[0]
        self.assertEqual(metadata.get("authorization"), "Bearer host-token")
        self.assertEqual(req.session.session_id, "s1")
        self.assertEqual(req.session.agent_id, "a")
        self.assertEqual(req.token_budget, 32000)
        self.assertTrue(req.force)
        self.assertEqual(req.current_token_count, 1234)
        self.assertEqual(req.compaction_target, types_pb2.COMPACTION_TARGET_THRESHOLD)
        self.assertEqual(req.custom_instructions, "keep the file paths")
        # Bounded by our own deadline (10 s), not only by the HostContext (60 s).
        self.assertIsNotNone(remaining)
        self.assertLessEqual(remaining, 10.5)  # grpc-timeout encoding rounds up a little

    def test_compact_is_bounded_by_the_host_context_expiry(self):
        self.stub.Compact(self.compact_request(expires_in_s=2.0), timeout=30)
        _, _, remaining = self.host.calls[0]
        self.assertLessEqual(remaining, 2.5)

    def test_compact_with_an_expired_host_context_does_not_call_the_host(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Compact(self.compact_request(expires_in_s=-1.0), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(self.host.calls, [])

    def test_compact_without_a_host_context(self):
        req = self.compact_request()
        req.ClearField("host")
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Compact(req, timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_compact_passes_on_the_hosts_error(self):
        self.host.mode = "fail"
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Compact(self.compact_request(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("no can do", cm.exception.details())

    def test_compact_deadline_cancels_the_host_call(self):
        self.host.mode = "hang"
        started = time.monotonic()
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Compact(self.compact_request(), timeout=0.5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertTrue(self.host.cancelled.wait(3.0), "the host call was not cancelled")
        self.assertLess(time.monotonic() - started, 3.0)

    def test_compact_cancellation_cancels_the_host_call(self):
        self.host.mode = "hang"
        call = self.stub.Compact.future(self.compact_request(), timeout=30)
        self.assertTrue(wait_for(lambda: len(self.host.calls) == 1))
        call.cancel()
        self.assertTrue(self.host.cancelled.wait(3.0), "the host call was not cancelled")

    def test_health(self):
        stub = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "contextd.v1.ContextEngineService"):
            self.assertEqual(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status, health_pb2.HealthCheckResponse.SERVING)
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        statuses = stub.List(health_pb2.HealthListRequest(), timeout=5).statuses
        self.assertEqual(statuses[""].status, health_pb2.HealthCheckResponse.SERVING)

    def test_health_watch(self):
        stub = health_pb2_grpc.HealthStub(self.channel)
        stream = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        try:
            self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.SERVING)
            self.health.set_all(Health.NOT_SERVING)
            self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.NOT_SERVING)
        finally:
            stream.cancel()
            self.health.set_all(Health.SERVING)


class FakeRegistry(registry_pb2_grpc.RegistryServiceServicer):
    def __init__(self):
        self.lock = threading.Lock()
        self.engines = {}  # id -> endpoint
        self.registers = []  # (request, authorization)
        self.deregisters = []
        self.get_engines = 0

    def RegisterEngine(self, request, context):
        with self.lock:
            self.registers.append((request, dict(context.invocation_metadata()).get("authorization")))
            self.engines[request.engine_id] = request.endpoint
        return registry_pb2.RegisterEngineResponse(ok=True, refusal=registry_pb2.REFUSAL_NONE, protocol_version=1)

    def GetEngine(self, request, context):
        with self.lock:
            self.get_engines += 1
            endpoint = self.engines.get(request.engine_id)
        if endpoint is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown engine")
        return registry_pb2.GetEngineResponse(engine=registry_pb2.EngineStatus(engine_id=request.engine_id, endpoint=endpoint))

    def DeregisterEngine(self, request, context):
        with self.lock:
            self.deregisters.append(request.engine_id)
            existed = self.engines.pop(request.engine_id, None) is not None
        return registry_pb2.DeregisterEngineResponse(deregistered=existed)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RegistrarTest(unittest.TestCase):
    def make(self, address, endpoint="127.0.0.1:5555", log=None):
        r = Registrar(log or quiet_log(), address, "window", "team", "t0k3n", endpoint, [1], heartbeat_s=0.1, retry_initial_s=0.05, retry_max_s=0.2)
        self.addCleanup(r.stop, False)
        return r

    def start_registry(self, port=0):
        reg = FakeRegistry()
        server, address = serve(lambda s: registry_pb2_grpc.add_RegistryServiceServicer_to_server(reg, s), port)
        self.addCleanup(lambda: server.stop(0).wait())
        return reg, server, address

    def test_registers_with_the_owner_token(self):
        reg, _, address = self.start_registry()
        r = self.make(address)
        r.start()
        self.assertTrue(r.registered.wait(5))
        req, auth = reg.registers[0]
        self.assertEqual(auth, "Bearer t0k3n")
        self.assertEqual((req.engine_id, req.owner, req.endpoint), ("window", "team", "127.0.0.1:5555"))
        self.assertTrue(req.allow_same_owner_refresh)
        self.assertEqual(list(req.protocol_versions), [1])

    def test_retries_while_the_registry_is_unreachable(self):
        port = free_port()
        r = self.make("127.0.0.1:%d" % port)
        r.start()
        time.sleep(0.5)
        self.assertFalse(r.registered.is_set())
        reg, _, _ = self.start_registry(port)
        self.assertTrue(r.registered.wait(10), "did not register once the registry came up")
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")

    def wait_for_heartbeats(self, reg, n):
        with reg.lock:
            start = reg.get_engines
        self.assertTrue(wait_for(lambda: reg.get_engines >= start + n), "heartbeats stopped")

    def test_registers_again_when_lost(self):
        reg, _, address = self.start_registry()
        r = self.make(address)
        r.start()
        self.assertTrue(r.registered.wait(5))
        with reg.lock:
            del reg.engines["window"]  # e.g. contextd restarted without it
        self.assertTrue(wait_for(lambda: r.registrations >= 2), "did not register again after NOT_FOUND")
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")

    def test_leaves_the_id_to_another_instance_until_it_deregisters(self):
        reg, _, address = self.start_registry()
        out = io.StringIO()
        r = self.make(address, log=JsonLogger(stream=out, level="debug"))
        r.start()
        self.assertTrue(r.registered.wait(5))

        def takeovers():
            records = [json.loads(line) for line in out.getvalue().splitlines()]
            return [rec for rec in records if "another instance now holds the registration of window at 127.0.0.1:9999" in rec["msg"]]

        # Another instance of the engine (same id and owner) took the id: heartbeats go on, no
        # registration takes it back, and the takeover is logged once.
        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"
        self.wait_for_heartbeats(reg, 5)
        self.assertEqual(len(reg.registers), 1)
        self.assertEqual(r.registrations, 1)
        self.assertEqual(reg.engines["window"], "127.0.0.1:9999")
        found = takeovers()
        self.assertEqual(len(found), 1, found)
        self.assertEqual((found[0]["level"], found[0]["registered_endpoint"]), ("warn", "127.0.0.1:9999"))

        # The other instance deregisters: NOT_FOUND, so this one registers again.
        with reg.lock:
            del reg.engines["window"]
        self.assertTrue(wait_for(lambda: r.registrations >= 2), "did not register again after the other instance left")
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")
        self.assertEqual(len(reg.registers), 2)

        # A later takeover is reported again, once.
        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"
        self.wait_for_heartbeats(reg, 3)
        self.assertEqual(len(reg.registers), 2)
        self.assertEqual(len(takeovers()), 2)

    def test_two_live_instances_do_not_reregister_over_each_other(self):
        reg, _, address = self.start_registry()
        first = self.make(address, endpoint="127.0.0.1:5555")
        first.start()
        self.assertTrue(first.registered.wait(5))
        second = self.make(address, endpoint="127.0.0.1:6666")
        second.start()
        self.assertTrue(second.registered.wait(5))
        self.assertEqual(reg.engines["window"], "127.0.0.1:6666")

        # Both heartbeat every 0.1 s for a second: the registration stays with the second one.
        time.sleep(1.0)
        self.assertEqual(len(reg.registers), 2)
        self.assertEqual(reg.engines["window"], "127.0.0.1:6666")

        # The second stops and deregisters (the registry points at it): the first takes the id over.
        second.stop(deregister=True)
        self.assertEqual(reg.deregisters, ["window"])
        self.assertTrue(wait_for(lambda: reg.engines.get("window") == "127.0.0.1:5555"), "the first did not register again")
        self.assertTrue(wait_for(lambda: first.registrations == 2), first.registrations)
        self.assertEqual(len(reg.registers), 3)

    def test_stop_deregisters_when_the_registration_is_ours(self):
        reg, _, address = self.start_registry()
        r = self.make(address)
        r.start()
        self.assertTrue(r.registered.wait(5))
        r.stop(deregister=True)
        self.assertEqual(reg.deregisters, ["window"])
        self.assertNotIn("window", reg.engines)

    def test_stop_leaves_another_instances_registration_alone(self):
        reg, _, address = self.start_registry()
        r = self.make(address)
        r.heartbeat_s = 60  # no heartbeat: the other instance keeps the id
        r.start()
        self.assertTrue(r.registered.wait(5))
        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"
        r.stop(deregister=True)
        self.assertEqual(reg.deregisters, [])
        self.assertEqual(reg.engines["window"], "127.0.0.1:9999")


if __name__ == "__main__":
    unittest.main()
