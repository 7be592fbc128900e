"""The window's tool-pair repair (assembly.py over contextd.turns.paired_turns): an aborted call is
removed, a result without its call dropped, and a view the repair leaves without any turn (only
results whose calls were compacted away) is answered as an empty history.

    /usr/bin/python3 -m unittest discover -s engines/window/tests -t engines/window
"""

import unittest

from .helpers import assistant, ids, result, summary, system, tool_pair_violations, turn, user

from assembly import select_window  # noqa: E402  (helpers put the engine and the package on sys.path)


class ToolPairs(unittest.TestCase):
    def test_an_aborted_call_is_removed_from_its_message(self):
        aborted = [user("do it", 10), assistant("trying", 10, calls=["lost"])]
        view = turn(0) + aborted + turn(1)
        w = select_window(view, 1000)
        self.assertEqual(tool_pair_violations(w.messages), [])
        self.assertEqual(len(w.messages), len(view))
        stripped = [m for m in w.messages if m.id == aborted[1].id][0]
        self.assertEqual([b.WhichOneof("block") for b in stripped.content], ["text"])
        self.assertEqual(stripped.token_count, 10)
        # The input is not modified.
        self.assertEqual(len(aborted[1].content), 2)

    def test_a_message_that_was_only_an_aborted_call_is_dropped(self):
        view = [user("go", 10), assistant("", 10, calls=["lost"])]
        w = select_window(view, 1000)
        self.assertEqual(ids(w.messages), [view[0].id])

    def test_a_result_without_its_call_is_dropped(self):
        view = [summary(tokens=5), result("gone", 10), assistant("so", 10)] + turn(0)
        w = select_window(view, 1000)
        self.assertEqual(tool_pair_violations(w.messages[1:]), [])
        self.assertNotIn(view[1].id, ids(w.messages))


class NothingLeftAfterTheRepair(unittest.TestCase):
    """No user message, and every other message an orphan: once raised IndexError (newest[0])."""

    def test_a_view_of_one_orphan_result_is_an_empty_window(self):
        w = select_window([result("x", 10)], 100)
        self.assertEqual(list(w.messages), [])
        self.assertEqual((w.estimated_tokens, w.overflow, w.whole_turns, w.partial_turn, w.dropped, w.pinned), (0, False, 0, False, 1, 0))
        self.assertEqual(list(select_window([result("x", 10)], None).messages), [])

    def test_only_the_pinned_messages_are_kept(self):
        start, s = system("rules", 20), summary(tokens=30)
        view = [start, s, result("a", 10), result("b", 500)]
        w = select_window(view, 100)
        self.assertEqual(ids(w.messages), [start.id, s.id])
        self.assertEqual((w.estimated_tokens, w.overflow, w.pinned, w.dropped), (50, False, 2, 2))
        self.assertTrue(w.summary_kept)
        # As for an empty history: pinned messages over the budget are the answer, flagged.
        w = select_window(view, 40)
        self.assertEqual(ids(w.messages), [start.id, s.id])
        self.assertTrue(w.overflow)

    def test_a_repaired_fragment_before_a_turn_is_left_out(self):
        view = [result("gone", 10)] + turn(0)
        w = select_window(view, 1000)
        self.assertEqual(ids(w.messages), ids(view[1:]))
        self.assertEqual(w.whole_turns, 1)


if __name__ == "__main__":
    unittest.main()
