"""The message helpers build the protos a runtime sends and read back what contextd answers."""

from __future__ import annotations

import json
import unittest

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import Message, Role, ToolCallBlock
from contextd import messages as m
from contextd.v1 import types_pb2


class BuildingTest(unittest.TestCase):
    def test_user_and_system_are_one_text_block(self) -> None:
        msg = m.user("Fix the failing test", timestamp_ms=1_741_000_000_000, metadata={"turn": "3"})
        self.assertEqual(msg.role, Role.ROLE_USER)
        self.assertEqual([b.text.text for b in msg.content], ["Fix the failing test"])
        self.assertEqual(msg.timestamp_ms, 1_741_000_000_000)
        self.assertEqual(dict(msg.metadata), {"turn": "3"})
        self.assertEqual(m.system("Be terse").role, Role.ROLE_SYSTEM)

    def test_assistant_text_then_tool_calls(self) -> None:
        msg = m.assistant(
            "Reading it.",
            tool_calls=[m.tool_call("call_1", "read_file", {"path": "app.py"}),
                        ToolCallBlock(id="call_2", name="run_tests", arguments_json="{}")],
        )
        self.assertEqual(msg.role, Role.ROLE_ASSISTANT)
        self.assertEqual([b.WhichOneof("block") for b in msg.content], ["text", "tool_call", "tool_call"])
        self.assertEqual(json.loads(msg.content[1].tool_call.arguments_json), {"path": "app.py"})
        self.assertEqual(msg.content[2].tool_call.id, "call_2")

    def test_assistant_without_text_has_no_empty_block(self) -> None:
        msg = m.assistant(tool_calls=[m.tool_call("c", "ls", "{\"dir\":\".\"}")])
        self.assertEqual([b.WhichOneof("block") for b in msg.content], ["tool_call"])
        self.assertEqual(msg.content[0].tool_call.arguments_json, "{\"dir\":\".\"}")

    def test_assistant_refuses_what_is_not_a_tool_call(self) -> None:
        with self.assertRaisesRegex(TypeError, "expected tool_call"):
            m.assistant("x", tool_calls=[m.text_block("not a call")])

    def test_tool_result(self) -> None:
        msg = m.tool_result("call_1", "run_tests", "1 failed", is_error=True)
        self.assertEqual((msg.role, msg.tool_call_id, msg.tool_name, msg.is_error),
                         (Role.ROLE_TOOL_RESULT, "call_1", "run_tests", True))
        self.assertEqual(m.text_of(msg), "1 failed")

    def test_unknown_fields_are_refused_by_protobuf(self) -> None:
        with self.assertRaises(ValueError):
            m.user("x", no_such_field=1)


class ReadingTest(unittest.TestCase):
    def test_text_of_joins_text_thinking_and_tool_calls(self) -> None:
        msg = Message(role=Role.ROLE_ASSISTANT, content=[
            types_pb2.ContentBlock(thinking=types_pb2.ThinkingBlock(thinking="hmm")),
            m.text_block("Let me look."),
            types_pb2.ContentBlock(image=types_pb2.ImageBlock(mime_type="image/png", data=b"\x89PNG")),
            m.tool_call("c1", "read_file", {"path": "a.py"}),
        ])
        self.assertEqual(m.text_of(msg), 'hmm\nLet me look.\nread_file({"path":"a.py"})')
        self.assertEqual(m.text_of(Message()), "")

    def test_the_compaction_summary_is_known_by_its_metadata(self) -> None:
        summary = m.user("<summary>...</summary>", metadata={m.SUMMARY_METADATA_KEY: m.SUMMARY_METADATA_VALUE})
        self.assertEqual(m.SUMMARY_METADATA_KEY, "contextd.kind")
        self.assertTrue(m.is_compaction_summary(summary))
        # The wording alone does not make a summary.
        self.assertFalse(m.is_compaction_summary(m.user("<summary>...</summary>")))


if __name__ == "__main__":
    unittest.main()
