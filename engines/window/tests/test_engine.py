"""The window engine on the SDK, served in process over real gRPC: GetInfo, Assemble (window,
runtime budget, overflow), IngestBatch, and Compact delegating to a HostService served in process;
main.py's environment. The SDK's own behaviour (registration, deadlines, health, errors) has its
tests in clients/python/tests/engine.

    /usr/bin/python3 -m unittest discover -s engines/window/tests -t engines/window
"""

import logging
import os
import subprocess
import sys
import time
import unittest
from concurrent import futures

from .helpers import ENGINE_DIR, result, summary, system, turn, types_pb2, user

import grpc  # noqa: E402

from contextd.engine import serve_engine  # noqa: E402
from contextd.v1 import engine_pb2, engine_pb2_grpc, host_pb2, host_pb2_grpc  # noqa: E402
from window_engine import window_engine  # noqa: E402

MAIN = os.path.join(ENGINE_DIR, "main.py")


def quiet_logger():
    logger = logging.getLogger("window.tests")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


class FakeHost(host_pb2_grpc.HostServiceServicer):
    def __init__(self):
        self.calls = []  # (request, metadata dict)

    def DelegateCompaction(self, request, context):
        self.calls.append((request, dict(context.invocation_metadata())))
        return host_pb2.DelegateCompactionResponse(
            ok=True,
            compacted=True,
            reason="compacted by the host",
            result=types_pb2.CompactionResult(summary="the summary", first_kept_entry_id="e7", tokens_before=1000, tokens_after=100),
        )


class WindowOverGrpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FakeHost()
        cls.host_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        host_pb2_grpc.add_HostServiceServicer_to_server(cls.host, cls.host_server)
        cls.host_address = "127.0.0.1:%d" % cls.host_server.add_insecure_port("127.0.0.1:0")
        cls.host_server.start()
        cls.running = serve_engine(window_engine(), block=False, registry="", handle_signals=False, logger=quiet_logger())
        cls.capped = serve_engine(window_engine(max_turns=1), block=False, registry="", handle_signals=False, logger=quiet_logger())
        cls.channels = [grpc.insecure_channel(cls.running.address), grpc.insecure_channel(cls.capped.address)]
        cls.stub = engine_pb2_grpc.ContextEngineServiceStub(cls.channels[0])
        cls.capped_stub = engine_pb2_grpc.ContextEngineServiceStub(cls.channels[1])

    @classmethod
    def tearDownClass(cls):
        for channel in cls.channels:
            channel.close()
        cls.running.stop()
        cls.capped.stop()
        cls.host_server.stop(0).wait()

    @staticmethod
    def assembled(res):
        """The ids of what the model sees: added messages, then the kept ones (kept_entry_ids)."""
        return [m.id for m in res.messages] + list(res.kept_entry_ids)

    def assemble(self, view, stub=None, **fields):
        req = engine_pb2.ContextEngineServiceAssembleRequest(messages=view, **fields)
        return (stub or self.stub).Assemble(req, timeout=5)

    def test_get_info(self):
        info = self.stub.GetInfo(engine_pb2.GetInfoRequest(), timeout=5).info
        self.assertEqual((info.id, info.name, info.version), ("window", "Sliding window", "1.0.0"))
        self.assertFalse(info.owns_compaction)
        self.assertEqual(info.turn_maintenance_mode, engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND)
        self.assertEqual(info.capabilities, engine_pb2.EngineCapabilities(ingest_batch=True))
        self.assertEqual(list(info.host_requirements), ["host-compaction"])
        self.assertEqual(list(info.protocol_versions), [1])

    def test_assemble(self):
        s = summary(tokens=50)
        view = [s] + turn(0) + turn(1) + turn(2)
        res = self.assemble(view, token_budget=130)
        self.assertEqual(self.assembled(res), [s.id] + [m.id for m in view[-8:]])
        # Messages of the view are answered by id, not sent back.
        self.assertEqual(len(res.messages), 0)
        self.assertEqual(res.estimated_tokens, 130)
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_ASSEMBLED)

    def test_system_messages_stay_first(self):
        sys_msg = system(tokens=20)
        view = [sys_msg] + turn(0) + turn(1)
        res = self.assemble(view, token_budget=60)
        self.assertEqual(self.assembled(res)[0], sys_msg.id)
        self.assertLessEqual(res.estimated_tokens, 60)

    def test_without_a_budget_the_runtime_budget_or_everything(self):
        view = turn(0) + turn(1)
        self.assertEqual(len(self.assembled(self.assemble(view))), len(view))
        req = engine_pb2.ContextEngineServiceAssembleRequest(messages=view)
        req.runtime_settings.limits.prompt_token_budget = 40
        self.assertEqual(self.assembled(self.stub.Assemble(req, timeout=5)), [m.id for m in view[-4:]])

    def test_max_turns(self):
        view = turn(0) + turn(1) + turn(2)
        self.assertEqual(self.assembled(self.assemble(view, stub=self.capped_stub)), [m.id for m in view[-4:]])

    def test_overflow(self):
        res = self.assemble([summary(tokens=80), user("big", 50)], token_budget=100)
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW)
        self.assertEqual(res.estimated_tokens, 130)

    def test_a_view_of_only_orphan_results_is_answered_with_the_pinned_messages(self):
        # Results whose calls were compacted away, and no user message: once an IndexError.
        sys_msg = system(tokens=20)
        res = self.assemble([sys_msg, result("gone", 10), result("gone too", 10)], token_budget=100)
        self.assertEqual(self.assembled(res), [sys_msg.id])
        self.assertEqual((res.estimated_tokens, res.prompt_authority), (20, types_pb2.PROMPT_AUTHORITY_ASSEMBLED))

    def test_ingest(self):
        self.assertTrue(self.stub.Ingest(engine_pb2.IngestRequest(message=user("x")), timeout=5).ingested)
        res = self.stub.IngestBatch(engine_pb2.IngestBatchRequest(messages=[user("x"), user("y")]), timeout=5)
        self.assertEqual(res.ingested_count, 2)

    def test_compact_delegates_to_the_host(self):
        req = engine_pb2.ContextEngineServiceCompactRequest(
            session=types_pb2.SessionRef(session_id="s1", agent_id="a"),
            token_budget=32000,
            force=True,
            host=types_pb2.HostContext(endpoint=self.host_address, token="host-token", expires_at_ms=int((time.time() + 60) * 1000)),
        )
        res = self.stub.Compact(req, timeout=10)
        self.assertEqual((res.ok, res.compacted, res.result.first_kept_entry_id), (True, True, "e7"))
        sent, metadata = self.host.calls[-1]
        self.assertEqual(metadata.get("authorization"), "Bearer host-token")
        self.assertEqual((sent.session.session_id, sent.token_budget, sent.force), ("s1", 32000, True))


class MainTest(unittest.TestCase):
    def run_main(self, **env):
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTD_", "WINDOW_")) and k != "PYTHONPATH"}
        child_env.update(env)
        # From another directory and without PYTHONPATH, as contextd's managed sidecar runs it.
        return subprocess.run([sys.executable, MAIN], env=child_env, cwd="/", capture_output=True, text=True, timeout=30)

    def test_bad_window_settings_exit_2_with_one_line(self):
        done = self.run_main(WINDOW_MAX_TURNS="many")
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr, "window: WINDOW_MAX_TURNS must be an integer, got 'many'\n")
        done = self.run_main(WINDOW_GRACE_MS="0")
        self.assertEqual((done.returncode, done.stderr), (2, "window: WINDOW_GRACE_MS must be >= 1, got 0\n"))

    def test_bad_sdk_settings_exit_2_with_one_line(self):
        done = self.run_main(CONTEXTD_ENGINE_LISTEN="nowhere")
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr, "window: listen address 'nowhere' is not host:port, [ipv6]:port or unix:/path\n")


if __name__ == "__main__":
    unittest.main()
