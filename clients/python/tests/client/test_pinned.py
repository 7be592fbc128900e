"""contextd.pinned: the split every sample engine makes before fitting the rest of the view."""

from __future__ import annotations

import ast
import unittest

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import messages as m
from contextd.pinned import is_pinned, is_system, split_pinned
from contextd.v1 import engine_pb2, types_pb2


def summary(text: str) -> types_pb2.Message:
    msg = m.user(text)
    msg.metadata[m.SUMMARY_METADATA_KEY] = m.SUMMARY_METADATA_VALUE
    return msg


class PinnedTest(unittest.TestCase):
    def test_system_messages_and_the_summary_are_pinned(self) -> None:
        self.assertTrue(is_pinned(m.system("rules")))
        self.assertTrue(is_system(m.system("rules")))
        self.assertTrue(is_pinned(summary("earlier")))
        self.assertFalse(is_system(summary("earlier")))
        for other in (m.user("hi"), m.assistant("ok"), m.tool_result("c1", "read", "x"), m.user("hi", metadata={"contextd.kind": "other"})):
            self.assertFalse(is_pinned(other), other)

    def test_split_keeps_view_order_on_both_sides(self) -> None:
        view = [m.system("a"), summary("s"), m.user("u1"), m.system("b"), m.assistant("a1"), m.user("u2")]
        pinned, rest = split_pinned(view)
        self.assertEqual([m.text_of(x) for x in pinned], ["a", "s", "b"])
        self.assertEqual([m.text_of(x) for x in rest], ["u1", "a1", "u2"])
        self.assertIs(pinned[0], view[0])  # the very same objects, not copies
        # A request's repeated field works as well as a list.
        request = engine_pb2.ContextEngineServiceAssembleRequest(messages=view)
        from_field = split_pinned(request.messages)
        self.assertEqual([len(from_field[0]), len(from_field[1])], [3, 3])
        self.assertEqual(split_pinned([]), ([], []))

    def test_imports_only_the_generated_types(self) -> None:
        # Its own imports: the standard library and contextd.v1.types_pb2, nothing of the client.
        source = (_paths.PACKAGE_ROOT / "contextd" / "pinned.py").read_text(encoding="utf-8")
        imported = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.update(f"{node.module}.{a.name}" for a in node.names)
        ours = {name for name in imported if name.startswith("contextd")}
        self.assertEqual(ours, {"contextd.v1.types_pb2"})
        self.assertTrue(all(n.split(".")[0] in ("contextd", "__future__", "collections", "typing") for n in imported), imported)

if __name__ == "__main__":
    unittest.main()
