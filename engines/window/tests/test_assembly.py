"""The window selection (assembly.py): pure logic, no server.

    /usr/bin/python3 -m unittest discover -s engines/window/tests -t engines/window
"""

import random
import unittest

from .helpers import assistant, ids, result, summary, system, tool_pair_violations, turn, types_pb2, user

from assembly import select_window  # noqa: E402  (helpers put the engine and the package on sys.path)
from contextd.turns import total_tokens  # noqa: E402


def session(turns, **kw):
    out = []
    for n in range(turns):
        out.extend(turn(n, **kw))
    return out


class WholeTurns(unittest.TestCase):
    def test_without_a_budget_everything_is_kept(self):
        view = [summary()] + session(5)
        w = select_window(view, None)
        self.assertEqual(ids(w.messages), ids(view))
        self.assertEqual(w.estimated_tokens, total_tokens(view))
        self.assertFalse(w.overflow)

    def test_newest_whole_turns_that_fit(self):
        view = session(6)  # each turn: user, call, result, wrap-up = 40 tokens
        w = select_window(view, 120)
        self.assertEqual(ids(w.messages), ids(view[-12:]))
        self.assertEqual(w.estimated_tokens, 120)
        self.assertEqual(w.whole_turns, 3)
        self.assertFalse(w.partial_turn)

    def test_a_turn_that_does_not_fit_whole_is_left_out_whole(self):
        view = session(6)
        w = select_window(view, 119)
        self.assertEqual(ids(w.messages), ids(view[-8:]))
        self.assertEqual(w.estimated_tokens, 80)
        self.assertEqual(w.messages[0].role, types_pb2.ROLE_USER)

    def test_selection_stops_at_the_first_turn_that_does_not_fit(self):
        # A big turn in the middle must not be skipped over to reach a small older one: no gaps.
        view = session(1) + turn(1, result_tokens=500) + session(2)
        w = select_window(view, 200)
        self.assertEqual(w.whole_turns, 2)
        self.assertEqual(ids(w.messages), ids(view[-8:]))

    def test_summary_is_kept_first(self):
        s = summary(tokens=50)
        view = [s] + session(6)
        w = select_window(view, 170)
        self.assertEqual(w.messages[0].id, s.id)
        self.assertTrue(w.summary_kept)
        self.assertEqual(ids(w.messages[1:]), ids(view[-12:]))
        self.assertEqual(w.estimated_tokens, 170)

    def test_a_summary_is_pinned_first_wherever_it_is(self):
        # The host sends it after the pinned system messages only; anywhere else it is still pinned.
        s = summary(tokens=5)
        view = session(1) + [s] + session(1)
        w = select_window(view, 1000)
        self.assertTrue(w.summary_kept)
        self.assertEqual(w.pinned, 1)
        self.assertEqual(ids(w.messages), [s.id] + ids(view[:4] + view[5:]))

    def test_max_turns(self):
        view = [summary()] + session(6)
        w = select_window(view, 10_000, max_turns=2)
        self.assertEqual(w.whole_turns, 2)
        self.assertEqual(ids(w.messages[1:]), ids(view[-8:]))

    def test_a_leading_fragment_is_a_unit_of_its_own(self):
        # The view may start mid-turn (after a summary); that fragment is kept or dropped whole.
        frag = [assistant("continuing", 10, calls=["f1"]), result("f1", 10), assistant("ok", 10)]
        view = [summary(tokens=10)] + frag + session(2)
        self.assertEqual(ids(select_window(view, 1000).messages), ids(view))
        self.assertEqual(ids(select_window(view, 109).messages[1:]), ids(view[-8:]))

    def test_after_a_budget_compaction_the_whole_compacted_view_is_kept(self):
        # The host's BUDGET compaction of an agent's session cuts inside the last
        # finished turn, at a tool-pair boundary: the view is the summary, a fragment of dozens of
        # tool pairs, the wrap-up and the pending request, and fits the prompt budget. The window
        # keeps all of it (the fragment is one unit, the pending request another), so it uses the
        # budget as fully as the compaction did.
        frag = []
        for k in range(25):
            frag += [assistant("step", 20, calls=["p%d" % k]), result("p%d" % k, 400)]
        frag.append(assistant("wrap-up", 30))
        view = [summary(tokens=4000)] + frag + [user("pending request", 17)]
        budget = 32_000
        self.assertLessEqual(total_tokens(view), 15_616)
        w = select_window(view, budget)
        self.assertEqual(ids(w.messages), ids(view))
        self.assertEqual(w.estimated_tokens, total_tokens(view))
        self.assertFalse(w.overflow)
        self.assertFalse(w.partial_turn)

    def test_empty_view(self):
        w = select_window([], 100)
        self.assertEqual(list(w.messages), [])
        self.assertEqual(w.estimated_tokens, 0)
        self.assertFalse(w.overflow)
        s = summary(tokens=20)
        self.assertEqual(ids(select_window([s], 100).messages), [s.id])
        self.assertTrue(select_window([s], 10).overflow)


class PinnedSystemMessages(unittest.TestCase):
    """docs/pinned-messages.md: system messages and the summary first, in view order, counted."""

    def test_system_messages_and_the_summary_come_first_in_view_order(self):
        start, s, middle = system("rules", 20), summary(tokens=30), system("now in French", 10)
        turns = session(4)  # 40 tokens each
        view = [start, s] + turns[:8] + [middle] + turns[8:]
        w = select_window(view, 140)
        self.assertEqual(ids(w.messages[:3]), [start.id, s.id, middle.id])
        self.assertEqual(w.pinned, 3)
        self.assertTrue(w.summary_kept)
        # 60 pinned tokens leave 80: the two newest turns, whole.
        self.assertEqual(ids(w.messages[3:]), ids(turns[-8:]))
        self.assertEqual(w.estimated_tokens, 140)
        self.assertEqual(w.whole_turns, 2)
        self.assertEqual(w.dropped, len(view) - len(w.messages))

    def test_a_system_message_inside_a_turn_moves_to_the_head_without_splitting_the_turn(self):
        t = turn(0)
        middle = system("be brief", 5)
        view = t[:2] + [middle] + t[2:]
        w = select_window(view, 1000)
        self.assertEqual(ids(w.messages), [middle.id] + ids(t))
        self.assertEqual(tool_pair_violations(w.messages[1:]), [])

    def test_a_large_system_prompt_leaves_less_for_the_turns(self):
        view = [system("policy", 100)] + session(6)
        self.assertEqual(select_window(view, 220).whole_turns, 3)
        self.assertEqual(select_window(view[1:], 220).whole_turns, 5)

    def test_overflow_when_the_pinned_messages_and_the_latest_user_message_do_not_fit(self):
        start, s = system("rules", 70), summary(tokens=20)
        view = [start, s] + session(2) + [user("next", 15)]
        w = select_window(view, 100)
        self.assertTrue(w.overflow)
        self.assertEqual(ids(w.messages), [start.id, s.id, view[-1].id])
        self.assertEqual(w.estimated_tokens, 105)

    def test_a_view_of_only_system_messages(self):
        view = [system("a", 10), system("b", 10)]
        self.assertEqual(ids(select_window(view, 100).messages), ids(view))
        self.assertTrue(select_window(view, 15).overflow)


class NewestTurnOverBudget(unittest.TestCase):
    def test_latest_user_and_the_longest_tail_that_fits(self):
        view = session(2) + turn(2, tool_calls=4)  # newest: user + 4×(call, result) + wrap-up = 100 tokens
        latest = view[-10]
        self.assertEqual(latest.role, types_pb2.ROLE_USER)
        w = select_window(view, 55)
        self.assertTrue(w.partial_turn)
        self.assertEqual(w.messages[0].id, latest.id)
        # 45 tokens left: 4 messages (40) would start with a tool result; the tail starts at a call.
        self.assertEqual(ids(w.messages[1:]), ids(view[-3:]))
        self.assertEqual(w.messages[1].role, types_pb2.ROLE_ASSISTANT)
        self.assertEqual(tool_pair_violations(w.messages), [])
        self.assertLessEqual(w.estimated_tokens, 55)

    def test_never_starts_with_a_tool_result(self):
        view = turn(0, tool_calls=3)
        for budget in range(10, 90):
            w = select_window(view, budget)
            self.assertEqual(w.messages[0].role, types_pb2.ROLE_USER, budget)
            if len(w.messages) > 1:
                self.assertNotEqual(w.messages[1].role, types_pb2.ROLE_TOOL_RESULT, budget)
            self.assertEqual(tool_pair_violations(w.messages), [], budget)
            self.assertLessEqual(w.estimated_tokens, budget)

    def test_parallel_calls_are_kept_with_all_their_results(self):
        view = turn(0, tool_calls=3, parallel=True)  # user, call×3, result, result, result, wrap-up
        w = select_window(view, 50)
        # The three results and the wrap-up fit (40) but would be orphans without the call message.
        self.assertEqual(ids(w.messages), [view[0].id, view[-1].id])
        w = select_window(view, 60)
        self.assertEqual(ids(w.messages), ids(view))
        self.assertEqual(tool_pair_violations(w.messages), [])

    def test_with_a_summary(self):
        s = summary(tokens=30)
        view = [s] + session(2) + turn(2, tool_calls=2)
        w = select_window(view, 70)
        self.assertEqual(w.messages[0].id, s.id)
        self.assertEqual(w.messages[1].role, types_pb2.ROLE_USER)
        self.assertEqual(w.messages[1].id, view[-6].id)
        self.assertLessEqual(w.estimated_tokens, 70)
        self.assertEqual(tool_pair_violations(w.messages[1:]), [])

    def test_overflow_when_summary_and_latest_user_do_not_fit(self):
        s = summary(tokens=80)
        view = [s] + session(2) + [user("huge request", 50)]
        w = select_window(view, 100)
        self.assertTrue(w.overflow)
        self.assertEqual(ids(w.messages), [s.id, view[-1].id])
        self.assertEqual(w.estimated_tokens, 130)

    def test_latest_user_alone_over_budget_overflows(self):
        view = session(2) + [user("huge request", 500)]
        w = select_window(view, 100)
        self.assertTrue(w.overflow)
        self.assertEqual(ids(w.messages), [view[-1].id])


class Properties(unittest.TestCase):
    """Random sessions and budgets: the invariants hold every time."""

    def random_view(self, rnd):
        view = []
        if rnd.random() < 0.3:
            view.append(system("start", rnd.randint(1, 300)))
        if rnd.random() < 0.5:
            view.append(summary(tokens=rnd.randint(1, 400)))
        if rnd.random() < 0.3:
            # A leading fragment that starts with results whose calls were before the view
            # (tool_call_id "gone…": orphans the repair drops), maybe with more after them.
            view.extend(result("gone-%d" % k, rnd.randint(1, 300)) for k in range(rnd.randint(1, 3)))
            if rnd.random() < 0.4:
                view += [assistant("f", rnd.randint(1, 100), calls=["f0"]), result("f0", rnd.randint(1, 300))]
            if rnd.random() < 0.4:
                view.append(assistant("after", rnd.randint(1, 100)))
        for n in range(rnd.randint(0 if view else 1, 12)):  # 0: a view without a user message
            if rnd.random() < 0.1:
                view.append(system("s%d" % n, rnd.randint(1, 100)))
            view.append(user("u%d" % n, rnd.randint(1, 200)))
            for k in range(rnd.randint(0, 4)):
                ids_ = ["r%d-%d-%d" % (n, k, j) for j in range(rnd.randint(1, 2))]
                view.append(assistant("a", rnd.randint(1, 100), calls=ids_))
                view.extend(result(cid, rnd.randint(1, 2000)) for cid in ids_)
            if rnd.random() < 0.8:
                view.append(assistant("wrap", rnd.randint(1, 200)))
        return view

    def test_invariants(self):
        rnd = random.Random(1234)
        for case in range(600):
            view = self.random_view(rnd)
            budget = rnd.randint(1, 12_000)
            w = select_window(view, budget)
            where = "case %d" % case
            out = list(w.messages)
            self.assertEqual(w.estimated_tokens, total_tokens(out), where)
            pinned = [m for m in view if m.role == types_pb2.ROLE_SYSTEM or m.metadata.get("contextd.kind") == "compaction_summary"]
            users = [m for m in view if m.role == types_pb2.ROLE_USER and m.metadata.get("contextd.kind") != "compaction_summary"]
            latest_user = users[-1:]
            self.assertEqual(ids(latest_user), [m.id for m in out if m.id in ids(latest_user)], where)
            # Every pinned message, first, in view order; none of them again later.
            self.assertEqual(w.pinned, len(pinned), where)
            self.assertEqual(ids(out[: len(pinned)]), ids(pinned), where)
            body = out[len(pinned) :]
            self.assertFalse(any(m.role == types_pb2.ROLE_SYSTEM for m in body), where)
            if w.overflow:
                self.assertGreater(w.estimated_tokens, budget, where)
                self.assertEqual(ids(body), ids(latest_user), where)
                continue
            self.assertLessEqual(w.estimated_tokens, budget, where)
            self.assertEqual(tool_pair_violations(body), [], where)
            # What is left of the rest once the orphans are dropped (the only malformed messages).
            rest = [m for m in view if m.id not in set(ids(pinned)) and not m.tool_call_id.startswith("gone")]
            if not rest:
                self.assertEqual((body, w.partial_turn), ([], False), where)
                continue
            # Whole turns: a contiguous tail of the rest (a partial newest turn: its user + a tail).
            if not w.partial_turn:
                self.assertEqual(ids(body), ids(rest[len(rest) - len(body) :]), where)
                # It starts at a user message, or it is all of the rest (the leading fragment kept).
                self.assertTrue(body[0].role == types_pb2.ROLE_USER or len(body) == len(rest), where)
            else:
                self.assertEqual(ids(body[: len(latest_user)]), ids(latest_user), where)
                tail = body[len(latest_user) :]
                if tail:
                    self.assertEqual(ids(tail), ids(rest[len(rest) - len(tail) :]), where)
                    self.assertNotEqual(tail[0].role, types_pb2.ROLE_TOOL_RESULT, where)


if __name__ == "__main__":
    unittest.main()
