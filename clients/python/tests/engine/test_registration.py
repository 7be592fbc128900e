"""Registration against a RegistryService served in process: the owner token, retry while the
registry is unreachable, registering again after NOT_FOUND, leaving the id to another instance that
took it over, refusals, and deregistration on stop."""

from __future__ import annotations

import socket
import threading
import unittest

import grpc

from contextd.engine import EngineLogger, RegistrationError
from contextd.engine.registration import Registrar, RegistrationSettings, backoff_delay
from contextd.v1 import registry_pb2, registry_pb2_grpc

from .support import EngineTestCase, LogCapture, minimal, serve_in_process, wait_for


class FakeRegistry(registry_pb2_grpc.RegistryServiceServicer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.engines: dict[str, str] = {}  # id -> endpoint
        self.registers: list[tuple[registry_pb2.RegisterEngineRequest, str | None]] = []
        self.deregisters: list[str] = []
        self.get_engines = 0
        self.refuse: int | None = None

    def RegisterEngine(self, request, context):
        with self.lock:
            self.registers.append((request, dict(context.invocation_metadata()).get("authorization")))
            if self.refuse is not None:
                return registry_pb2.RegisterEngineResponse(ok=False, refusal=self.refuse, existing_owner="other", message="taken")
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RegistrarTest(unittest.TestCase):
    def make(self, address: str, endpoint: str = "127.0.0.1:5555", logs: LogCapture | None = None, heartbeat: float = 0.1) -> Registrar:
        logs = logs or LogCapture()
        settings = RegistrationSettings(
            registry=address, engine_id="window", owner="team", owner_token="t0k3n", endpoint=endpoint,
            heartbeat=heartbeat, retry_initial=0.05, retry_max=0.2,
        )
        r = Registrar(settings, EngineLogger(logs.logger, {"engine": "window"}))
        self.addCleanup(r.stop, False)
        return r

    def start_registry(self, port: int = 0) -> tuple[FakeRegistry, str]:
        reg = FakeRegistry()
        server, address = serve_in_process(lambda s: registry_pb2_grpc.add_RegistryServiceServicer_to_server(reg, s), port)
        self.addCleanup(lambda: server.stop(0).wait())
        return reg, address

    def wait_for_heartbeats(self, reg: FakeRegistry, n: int) -> None:
        with reg.lock:
            start = reg.get_engines
        self.assertTrue(wait_for(lambda: reg.get_engines >= start + n), "heartbeats stopped")

    def test_backoff_doubles_with_jitter_up_to_the_maximum(self):
        for attempt, (low, high) in enumerate([(0.1, 0.2), (0.2, 0.4), (0.4, 0.8)]):
            self.assertTrue(low <= backoff_delay(attempt, 0.2, 5.0) <= high, attempt)
        self.assertTrue(2.5 <= backoff_delay(40, 0.2, 5.0) <= 5.0)

    def test_registers_with_the_owner_token(self):
        reg, address = self.start_registry()
        r = self.make(address)
        r.start()
        self.assertEqual(r.wait_registered(5).protocol_version, 1)
        req, auth = reg.registers[0]
        self.assertEqual(auth, "Bearer t0k3n")
        self.assertEqual((req.engine_id, req.owner, req.endpoint), ("window", "team", "127.0.0.1:5555"))
        self.assertTrue(req.allow_same_owner_refresh)
        self.assertEqual(list(req.protocol_versions), [1])
        self.assertEqual((r.status.state, r.status.registrations), ("registered", 1))

    def test_retries_while_the_registry_is_unreachable(self):
        port = free_port()
        logs = LogCapture()
        r = self.make(f"127.0.0.1:{port}", logs=logs)
        r.start()
        logs.wait_for(lambda line: line["msg"].endswith("; retrying") and line["code"] == "UNAVAILABLE")
        self.assertEqual(r.status.state, "registering")
        reg, _ = self.start_registry(port)
        r.wait_registered(10)
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")

    def test_a_refusal_is_final(self):
        reg, address = self.start_registry()
        reg.refuse = registry_pb2.REFUSAL_OWNED_BY_OTHER
        logs = LogCapture()
        r = self.make(address, logs=logs)
        r.start()
        with self.assertRaises(RegistrationError) as cm:
            r.wait_registered(5)
        self.assertEqual(cm.exception.refusal, registry_pb2.REFUSAL_OWNED_BY_OTHER)
        self.assertIn('registry refused engine "window": OWNED_BY_OTHER (held by owner "other"): taken', str(cm.exception))
        line = logs.wait_for(lambda line: line["level"] == "error")
        self.assertIn("not retrying (the engine keeps serving)", line["msg"])
        self.assertEqual(r.status.state, "failed")
        self.assertEqual(len(reg.registers), 1)

    def test_registers_again_when_lost(self):
        reg, address = self.start_registry()
        logs = LogCapture()
        r = self.make(address, logs=logs)
        r.start()
        r.wait_registered(5)
        with reg.lock:
            del reg.engines["window"]  # e.g. contextd restarted without it
        logs.wait_for(lambda line: line["msg"] == "registered again with the registry")
        self.assertEqual(r.status.registrations, 2)
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")

    def test_leaves_the_id_to_another_instance_until_it_deregisters(self):
        reg, address = self.start_registry()
        logs = LogCapture()
        r = self.make(address, logs=logs)
        r.start()
        r.wait_registered(5)

        def takeovers():
            return [line for line in list(logs.lines) if "another instance now holds the registration of window at 127.0.0.1:9999" in line["msg"]]

        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"
        self.wait_for_heartbeats(reg, 5)
        self.assertEqual((len(reg.registers), r.status.registrations), (1, 1))
        found = takeovers()
        self.assertEqual(len(found), 1, found)
        self.assertEqual((found[0]["level"], found[0]["registered_endpoint"]), ("warn", "127.0.0.1:9999"))

        with reg.lock:
            del reg.engines["window"]  # the other instance deregistered: NOT_FOUND
        self.assertTrue(wait_for(lambda: r.status.registrations >= 2), "did not register again after the other instance left")
        self.assertEqual(reg.engines.get("window"), "127.0.0.1:5555")

        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"  # a later takeover is reported again, once
        self.wait_for_heartbeats(reg, 3)
        self.assertEqual(len(reg.registers), 2)
        self.assertEqual(len(takeovers()), 2)

    def test_two_live_instances_do_not_reregister_over_each_other(self):
        reg, address = self.start_registry()
        first = self.make(address, endpoint="127.0.0.1:5555")
        first.start()
        first.wait_registered(5)
        second = self.make(address, endpoint="127.0.0.1:6666")
        second.start()
        second.wait_registered(5)
        self.wait_for_heartbeats(reg, 10)  # both heartbeat every 0.1 s: the id stays with the second
        self.assertEqual(len(reg.registers), 2)
        self.assertEqual(reg.engines["window"], "127.0.0.1:6666")
        second.stop(deregister=True)
        self.assertEqual(reg.deregisters, ["window"])
        self.assertTrue(wait_for(lambda: reg.engines.get("window") == "127.0.0.1:5555"), "the first did not register again")
        self.assertTrue(wait_for(lambda: first.status.registrations == 2))

    def test_stop_deregisters_only_its_own_registration(self):
        reg, address = self.start_registry()
        r = self.make(address)
        r.start()
        r.wait_registered(5)
        r.stop(deregister=True)
        self.assertEqual(reg.deregisters, ["window"])
        self.assertNotIn("window", reg.engines)

        other = self.make(address, heartbeat=60)  # no heartbeat: the other instance keeps the id
        other.start()
        other.wait_registered(5)
        with reg.lock:
            reg.engines["window"] = "127.0.0.1:9999"
        other.stop(deregister=True)
        self.assertEqual(reg.deregisters, ["window"])
        self.assertEqual(reg.engines["window"], "127.0.0.1:9999")


class ServeEngineRegistrationTest(EngineTestCase):
    def test_registers_the_real_port_and_deregisters_on_stop(self):
        reg = FakeRegistry()
        server, address = serve_in_process(lambda s: registry_pb2_grpc.add_RegistryServiceServicer_to_server(reg, s))
        self.addCleanup(lambda: server.stop(0).wait())
        running, logs = self.serve(minimal(), registry=address, owner="team", owner_token="s3cret", heartbeat=0.1)
        self.assertEqual(running.wait_registered(5).protocol_version, 1)
        self.assertEqual(reg.engines["test-engine"], running.address)
        self.assertEqual(reg.registers[0][1], "Bearer s3cret")
        line = logs.wait_for(lambda line: line["msg"] == "registered with the registry")
        self.assertEqual((line["endpoint"], line["owner"], line["registry"]), (running.address, "team", address))
        running.stop()
        self.assertEqual(reg.deregisters, ["test-engine"])
        self.assertEqual(running.registration.state, "stopped")
        messages = logs.messages()
        self.assertLess(messages.index("deregistered from the registry"), messages.index("engine stopped"))

    def test_without_a_registry(self):
        running, _ = self.serve(minimal())
        self.assertIsNone(running.registration)
        self.assertIsNone(running.wait_registered(0))


if __name__ == "__main__":
    unittest.main()
