"""serve_engine in a real process (probe_engine.py): a bad start exits 2 with one line, SIGTERM
drains the call in flight and exits 0, and the engine stops when its parent process is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import unittest
from pathlib import Path
from typing import Any

import grpc

from contextd.v1 import engine_pb2, engine_pb2_grpc, types_pb2

PROBE = Path(__file__).resolve().parent / "probe_engine.py"
PACKAGE_DIR = Path(__file__).resolve().parents[2]


def probe_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTD_", "PROBE_"))}
    env.update(PYTHONPATH=str(PACKAGE_DIR), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", CONTEXTD_LOG_LEVEL="debug")
    env.update(extra)
    return env


class Probe:
    """The probe engine as a child process, its stderr JSON lines collected as they come."""

    def __init__(self, test: unittest.TestCase, **env: str) -> None:
        env = {**getattr(test, "probe_env", {}), **env}
        self.proc = subprocess.Popen([sys.executable, str(PROBE)], env=probe_env(**env), stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.kill)
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.address = self.wait_for(lambda line: line["msg"] == "engine listening")["address"]

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._cond:
                self.raw.append(raw)
                if raw.startswith("{"):
                    self.lines.append(json.loads(raw))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pred, timeout: float = 15.0) -> dict[str, Any]:
        with self._cond:
            found = self._cond.wait_for(lambda: next((line for line in self.lines if pred(line)), None) or self.proc.poll() is not None, timeout)
            match = next((line for line in self.lines if pred(line)), None)
            if not found or match is None:
                raise AssertionError(f"no matching log line; output:\n{''.join(self.raw)}")
            return match

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(5)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


class ProcessTest(unittest.TestCase):
    #: Extra environment of every probe this class runs.
    probe_env: dict[str, str] = {}

    def run_until_exit(self, **env: str) -> subprocess.CompletedProcess[str]:
        env = {**self.probe_env, **env}
        return subprocess.run([sys.executable, str(PROBE)], env=probe_env(**env), capture_output=True, text=True, timeout=30)

    def test_an_invalid_engine_exits_2_with_one_line(self):
        done = self.run_until_exit(PROBE_BROKEN="1")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(done.stderr.count("\n"), 1, done.stderr)
        self.assertRegex(done.stderr, r"^serve_engine: invalid engine definition: `id` 'legacy' is reserved for contextd's built-in engine")

    def test_a_bad_option_exits_2_with_one_line(self):
        done = self.run_until_exit(CONTEXTD_REGISTRY="127.0.0.1:1")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(done.stderr, "py-probe: registering with 127.0.0.1:1 needs an owner: set `owner` or CONTEXTD_OWNER "
                         "(and usually `owner_token` / CONTEXTD_OWNER_TOKEN)\n")

    def test_sigterm_drains_the_call_in_flight_and_exits_0(self):
        probe = Probe(self, PROBE_SLOW_S="1")
        with grpc.insecure_channel(probe.address) as channel:
            stub = engine_pb2_grpc.ContextEngineServiceStub(channel)
            req = engine_pb2.ContextEngineServiceAssembleRequest(
                session=types_pb2.SessionRef(session_id="slow-1"), messages=[types_pb2.Message(id="m1", token_count=3)]
            )
            call = stub.Assemble.future(req, timeout=20)
            probe.wait_for(lambda line: line["msg"] == "probe: slow call started")
            probe.proc.send_signal(signal.SIGTERM)
            self.assertEqual([m.id for m in call.result().messages], ["m1"])
        self.assertEqual(probe.proc.wait(20), 0)
        messages = [line["msg"] for line in probe.lines]
        self.assertIn("signal received: deregistering and draining", messages)
        self.assertEqual(messages[-1], "engine stopped")
        self.assertEqual(next(line for line in probe.lines if line["msg"].startswith("signal"))["signal"], "SIGTERM")

    def test_stops_when_the_parent_process_is_gone(self):
        parent = subprocess.Popen(["sleep", "60"])
        self.addCleanup(lambda: (parent.poll() is None and parent.kill(), parent.wait()))
        probe = Probe(self, CONTEXTD_PARENT_PID=str(parent.pid))
        parent.kill()
        parent.wait()  # reaped: the pid is gone
        self.assertEqual(probe.proc.wait(20), 0)
        gone = probe.wait_for(lambda line: line["msg"] == "contextd (parent process) is gone; stopping")
        self.assertEqual((gone["level"], gone["parent_pid"]), ("warn", parent.pid))
        self.assertEqual(probe.lines[-1]["msg"], "engine stopped")


class AsyncProcessTest(ProcessTest):
    """The same with the probe's Assemble an `async def`: the engine served on grpc.aio."""

    probe_env = {"PROBE_ASYNC": "1"}

    def test_it_is_served_on_grpc_aio(self):
        probe = Probe(self)
        self.assertEqual(probe.wait_for(lambda line: line["msg"] == "engine listening")["server"], "grpc.aio")


if __name__ == "__main__":
    unittest.main()
