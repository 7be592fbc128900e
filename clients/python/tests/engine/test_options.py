"""serve_engine's options: defaults from the SDK environment variables, checks that name the option."""

from __future__ import annotations

import json
import logging
import sys
import unittest

from contextd.channels import TlsConfig
from contextd.engine import JsonFormatter, ServeOptionsError
from contextd.engine.listen import parse_listen, registrable_host
from contextd.engine.options import resolve_options


class ResolveTest(unittest.TestCase):
    def refused(self, **given) -> str:
        with self.assertRaises(ServeOptionsError) as cm:
            resolve_options({"env": {}, **given})
        return str(cm.exception)

    def test_defaults(self):
        opts = resolve_options({"env": {}})
        self.assertIsNone(opts.registry)
        self.assertEqual((opts.listen, opts.log_level, opts.heartbeat, opts.drain_timeout), ("127.0.0.1:0", "info", 2.0, 5.0))
        self.assertEqual((opts.retry_initial, opts.retry_max, opts.block, opts.handle_signals), (0.2, 5.0, True, True))
        self.assertIsNone(opts.parent_pid)

    def test_from_the_environment(self):
        env = {
            "CONTEXTD_REGISTRY": " 127.0.0.1:50051 ",
            "CONTEXTD_OWNER": "team",
            "CONTEXTD_OWNER_TOKEN": "s3cret",
            "CONTEXTD_ENGINE_LISTEN": "0.0.0.0:50062",
            "CONTEXTD_ENGINE_ADVERTISE": "window:50062",
            "CONTEXTD_LOG_LEVEL": "debug",
            "CONTEXTD_PARENT_PID": "4242",
        }
        opts = resolve_options({"env": env})
        self.assertEqual(
            (opts.registry, opts.owner, opts.owner_token, opts.listen, opts.advertise, opts.log_level, opts.parent_pid),
            ("127.0.0.1:50051", "team", "s3cret", "0.0.0.0:50062", "window:50062", "debug", 4242),
        )

    def test_explicit_options_win_and_an_empty_registry_disables_registration(self):
        env = {"CONTEXTD_REGISTRY": "127.0.0.1:50051", "CONTEXTD_OWNER": "team", "CONTEXTD_LOG_LEVEL": "debug"}
        opts = resolve_options({"env": env, "registry": "", "log_level": "warn", "heartbeat": 0.5})
        self.assertEqual((opts.registry, opts.log_level, opts.heartbeat), (None, "warn", 0.5))

    def test_refusals_name_the_option(self):
        self.assertIn("needs an owner", self.refused(registry="127.0.0.1:1"))
        self.assertEqual(self.refused(heartbeet=1), "unknown option `heartbeet`: did you mean `heartbeat`?")
        self.assertIn("`heartbeat` must be a positive number of seconds (got 0)", self.refused(heartbeat=0))
        self.assertIn("`drain_timeout`", self.refused(drain_timeout="5s"))
        self.assertIn("listen address 'nope'", self.refused(listen="nope"))
        self.assertIn("listen address 'unix:'", self.refused(listen="unix:"))
        self.assertIn("log level 'loud'", self.refused(log_level="loud"))
        self.assertIn("`max_workers`", self.refused(max_workers=0))
        self.assertIn("`tls`", self.refused(tls="yes"))
        self.assertIn("`block` must be True or False", self.refused(block="no"))
        self.assertIn("`listen` must be a string", self.refused(listen=50051))
        self.assertIn("CONTEXTD_PARENT_PID must be an integer", self.refused(env={"CONTEXTD_PARENT_PID": "me"}))
        # The token is never echoed.
        problem = self.refused(env={"CONTEXTD_OWNER_TOKEN": "s3cret with spaces"})
        self.assertIn("not a valid bearer token", problem)
        self.assertNotIn("s3cret", problem)
        # A trailing newline (from a token file) is trimmed, like every other value from the environment.
        self.assertEqual(resolve_options({"env": {"CONTEXTD_OWNER_TOKEN": "s3cret\n"}}).owner_token, "s3cret")

    def test_tls_passes_through(self):
        tls = TlsConfig()
        self.assertIs(resolve_options({"env": {}, "tls": tls}).tls, tls)


class ListenTest(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(parse_listen("127.0.0.1:0").target, "127.0.0.1:0")
        v6 = parse_listen("[::1]:5000")
        self.assertEqual((v6.host, v6.port, v6.target), ("::1", 5000, "[::1]:5000"))
        self.assertEqual(parse_listen(":7000").host, "0.0.0.0")
        self.assertEqual(parse_listen("unix:/tmp/e.sock").kind, "unix")
        for bad in ("::1:5000", "host", "host:99999", "host:x"):
            with self.assertRaises(ServeOptionsError):
                parse_listen(bad)

    def test_a_wildcard_bind_registers_loopback(self):
        self.assertEqual(registrable_host("0.0.0.0"), ("127.0.0.1", True))
        self.assertEqual(registrable_host("::"), ("::1", True))
        self.assertEqual(registrable_host("10.1.2.3"), ("10.1.2.3", False))


class JsonFormatterTest(unittest.TestCase):
    def record(self, msg: str, level: int = logging.INFO, **extra) -> dict:
        logger = logging.getLogger("contextd.tests.formatter")
        rec = logger.makeRecord(logger.name, level, __file__, 1, msg, (), None, extra=extra)
        return json.loads(JsonFormatter().format(rec))

    def test_one_object_per_record(self):
        line = self.record("registered", session="s1", tokens=3)
        self.assertEqual((line["level"], line["msg"], line["session"], line["tokens"]), ("info", "registered", "s1", 3))
        self.assertRegex(line["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(self.record("w", logging.WARNING)["level"], "warn")

    def test_exceptions(self):
        logger = logging.getLogger("contextd.tests.formatter")
        try:
            raise ValueError("bad value")
        except ValueError:
            rec = logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
        line = json.loads(JsonFormatter().format(rec))
        self.assertEqual((line["err"]["type"], line["err"]["message"]), ("ValueError", "bad value"))
        self.assertIn("Traceback", line["err"]["stack"])


if __name__ == "__main__":
    unittest.main()
