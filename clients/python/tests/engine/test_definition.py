"""Engine: validation at start, capabilities derived from the optional methods, EngineInfo."""

from __future__ import annotations

import unittest

from contextd.engine import Engine, EngineDefinitionError, delegate_compaction_to_host, engine_id_problem
from contextd.v1 import engine_pb2

from .support import minimal


def noop(req, ctx):
    return None


class EngineIdTest(unittest.TestCase):
    def test_the_contract_rule(self):
        for good in ("window", "a", "A.b_c-9", "x" * 128, "legacy-plus", "9lives"):
            self.assertIsNone(engine_id_problem(good), good)
        for bad, why in (
            ("", "empty"),
            ("x" * 129, "longer than 128"),
            ("-lead", "ASCII letters"),
            (".lead", "ASCII letters"),
            ("has space", "ASCII letters"),
            ("ünïcode", "ASCII letters"),
            ("a/b", "ASCII letters"),
            ("legacy", "reserved"),
            ("LEGACY", "reserved"),
            ("Legacy", "reserved"),
        ):
            self.assertIn(why, engine_id_problem(bad) or "", bad)


class ValidationTest(unittest.TestCase):
    def invalid(self, **overrides) -> str:
        with self.assertRaises(EngineDefinitionError) as cm:
            minimal(**overrides).validate()
        self.assertTrue(str(cm.exception).startswith("invalid engine definition: "), str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        return str(cm.exception)

    def test_a_minimal_engine_is_valid(self):
        minimal().validate()

    def test_id(self):
        self.assertIn("`id` '' is empty", self.invalid(id=""))
        self.assertIn("reserved", self.invalid(id="Legacy"))
        self.assertIn("ASCII", self.invalid(id=" window"))
        self.assertIn("must be a string", self.invalid(id=7))

    def test_name(self):
        self.assertIn("`name` must be a non-empty string", self.invalid(name=""))
        self.assertIn("`name`", self.invalid(name="   "))
        self.assertIn("`name`", self.invalid(name=None))

    def test_required_methods(self):
        self.assertIn("`assemble` must be a function (it is missing)", self.invalid(assemble=None))
        self.assertIn("`compact` must be a function (it is a str)", self.invalid(compact="delegate"))

    def test_optional_methods(self):
        self.assertIn("`after_turn` must be a function or None (it is a int)", self.invalid(after_turn=3))

    def test_async_methods_make_an_async_engine(self):
        async def assemble(req, ctx):
            return {}

        self.assertTrue(minimal(assemble=assemble).asynchronous)
        self.assertFalse(minimal().asynchronous)

        class AsyncCallable:
            async def __call__(self, req, ctx):
                return {}

        self.assertIn("`assemble` is an object with an async __call__", self.invalid(assemble=AsyncCallable()))

    def test_other_fields(self):
        self.assertIn("`version`", self.invalid(version=1))
        self.assertIn("`owns_compaction`", self.invalid(owns_compaction="yes"))
        self.assertIn("`turn_maintenance_mode`", self.invalid(turn_maintenance_mode="sometimes"))
        self.assertIn("`turn_maintenance_mode`", self.invalid(turn_maintenance_mode=7))
        self.assertIn("`host_requirements`", self.invalid(host_requirements="llm-complete"))
        self.assertIn("`host_requirements`", self.invalid(host_requirements=["llm-complete", ""]))

    def test_a_misspelt_method_is_refused_by_the_dataclass(self):
        with self.assertRaises(TypeError):
            Engine(id="x", name="X", assemble=noop, compact=noop, afterturn=noop)  # type: ignore[call-arg]


class InfoTest(unittest.TestCase):
    def test_defaults(self):
        info = minimal().info()
        self.assertEqual((info.id, info.name, info.version), ("test-engine", "Test engine", "0.1.0"))
        self.assertFalse(info.owns_compaction)
        self.assertEqual(info.turn_maintenance_mode, engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND)
        self.assertEqual(info.capabilities, engine_pb2.EngineCapabilities())
        self.assertEqual(list(info.host_requirements), [])
        self.assertEqual(list(info.protocol_versions), [1])

    def test_capabilities_follow_the_optional_methods(self):
        table = {
            "bootstrap": "bootstrap",
            "ingest_batch": "ingest_batch",
            "after_turn": "after_turn",
            "maintain": "maintain",
            "prepare_subagent_spawn": "subagents",
            "rollback_subagent_spawn": "subagents",
            "on_subagent_ended": "subagents",
            "dispose": "dispose",
            "forget_session": "forget",
        }
        for method, capability in table.items():
            caps = minimal(**{method: noop}).info().capabilities
            on = [f.name for f in caps.DESCRIPTOR.fields if getattr(caps, f.name)]
            self.assertEqual(on, [capability], method)
        # ingest is no capability: the host calls it anyway, and the default answers ingested=true.
        self.assertEqual(minimal(ingest=noop).info().capabilities, engine_pb2.EngineCapabilities())

    def test_static_fields(self):
        info = minimal(owns_compaction=True, turn_maintenance_mode="background", host_requirements=("llm-complete",), version="2.0.0").info()
        self.assertTrue(info.owns_compaction)
        self.assertEqual(info.turn_maintenance_mode, engine_pb2.TURN_MAINTENANCE_MODE_BACKGROUND)
        self.assertEqual(list(info.host_requirements), ["llm-complete"])
        self.assertEqual(info.version, "2.0.0")
        mode = minimal(turn_maintenance_mode=engine_pb2.TURN_MAINTENANCE_MODE_UNSPECIFIED).info().turn_maintenance_mode
        self.assertEqual(mode, engine_pb2.TURN_MAINTENANCE_MODE_FOREGROUND)

    def test_delegating_compaction_declares_host_compaction(self):
        self.assertEqual(list(minimal(compact=delegate_compaction_to_host).info().host_requirements), ["host-compaction"])
        both = minimal(compact=delegate_compaction_to_host, host_requirements=["llm-complete", "host-compaction"]).info()
        self.assertEqual(list(both.host_requirements), ["llm-complete", "host-compaction"])
        # A compact of one's own that delegates must declare it itself.
        self.assertEqual(list(minimal(compact=lambda r, c: delegate_compaction_to_host(r, c)).info().host_requirements), [])


class ReexportTest(unittest.TestCase):
    def test_split_pinned_is_contextd_pinned(self):
        from contextd import pinned
        from contextd.engine import split_pinned

        self.assertIs(split_pinned, pinned.split_pinned)


if __name__ == "__main__":
    unittest.main()
