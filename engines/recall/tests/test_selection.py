"""The budgeted selection (selection.py), pure: pinned first, the latest user message, fresh whole
turns within their share, recalled units whole and in conversation order, the rest of the budget
to more fresh turns, never over the budget, tool pairs intact; randomized invariants."""

import random
import unittest

from .helpers import TempIndex, agentic_turn, assistant, ids, result, summary, system, tool_call_ids, tool_pair_violations, turn, types_pb2, user

from contextd.turns import paired_turns  # noqa: E402

from index import RecallUnit  # noqa: E402
from selection import complete, plan_fresh  # noqa: E402


def unit(messages, ords):
    return RecallUnit(list(messages), list(ords), sum(m.token_count for m in messages), -1.0, frozenset(m.id for m in messages))


def select(view, budget, units=(), share=0.55):
    return complete(plan_fresh(view, budget, share), units, {m.id: m for m in view})


class WindowBehaviour(unittest.TestCase):
    """Without recalled units: a sliding window that uses the budget."""

    def test_newest_whole_turns_fill_the_budget(self):
        view = turn(0) + turn(1) + turn(2)  # 4 messages x 10 tokens each turn
        a = select(view, 85)
        self.assertEqual(ids(a.messages), ids(view[-8:]))
        self.assertEqual((a.estimated_tokens, a.whole_turns, a.overflow, a.recalled), (80, 2, False, []))

    def test_pinned_first_and_counted(self):
        s, sy = summary(tokens=50), system(tokens=20)
        view = [sy, s] + turn(0) + turn(1)
        a = select(view, 115)
        self.assertEqual(ids(a.messages), [sy.id, s.id] + ids(view[-4:]))
        self.assertTrue(a.summary_kept)

    def test_everything_without_a_budget(self):
        view = [summary()] + turn(0) + turn(1)
        self.assertEqual(ids(select(view, None).messages), ids(view))

    def test_an_oversized_newest_turn_is_cut_at_a_tool_pair_boundary(self):
        view = turn(0) + turn(1, tool_calls=3, result_tokens=100)
        newest = view[4:]
        a = select(view, 140)
        # user (10) + last pair (10 + 100) + wrap-up (10) = 130; the pair before it does not fit.
        self.assertEqual(ids(a.messages), [newest[0].id] + ids(newest[-3:]))
        self.assertTrue(a.partial_turn)
        self.assertEqual(tool_pair_violations(a.messages), [])
        self.assertNotEqual(a.messages[1].role, types_pb2.ROLE_TOOL_RESULT)

    def test_the_budget_left_takes_a_tool_safe_tail_of_the_next_older_turn(self):
        older = turn(0, tool_calls=2, result_tokens=100)  # user, call, result(100), call, result(100), wrap-up
        view = older + turn(1)
        a = select(view, 40 + 130)
        # turn 1 (40), then of turn 0 what fits 130: the last pair and the wrap-up (120).
        self.assertEqual(ids(a.messages), ids(older[3:]) + ids(view[6:]))
        self.assertEqual(tool_pair_violations(a.messages), [])
        self.assertEqual(a.estimated_tokens, 160)

    def test_overflow_only_when_pinned_and_latest_user_do_not_fit(self):
        s = summary(tokens=80)
        latest = user("big", 50)
        a = select([s] + turn(0) + [latest], 100)
        self.assertTrue(a.overflow)
        self.assertEqual(ids(a.messages), [s.id, latest.id])
        self.assertEqual(a.estimated_tokens, 130)
        self.assertFalse(select([s] + turn(0) + [latest], 130).overflow)


class Recall(unittest.TestCase):
    def test_fresh_turns_take_their_share_then_recall_then_more_turns(self):
        old = [user("planted fact walrus", 30)]  # before the cut: not in the view
        view = turn(0) + turn(1) + turn(2) + turn(3)  # 40 tokens each
        plan = plan_fresh(view, 200, share=0.5)
        self.assertEqual(ids(plan.tail), ids(view[-8:]))  # 80 of the 100 the share allows
        a = complete(plan, [unit(old, [1])], {m.id: m for m in view})
        # 80 fresh + 30 recalled; the 90 left take two more turns (one of 40 does not fit a third time).
        self.assertEqual(ids(a.messages), [old[0].id] + ids(view[-16:]))
        self.assertEqual(ids(a.recalled), [old[0].id])
        self.assertEqual(a.estimated_tokens, 190)

    def test_recalled_units_in_conversation_order_after_pinned(self):
        sy, s = system(tokens=5), summary(tokens=5)
        u1 = [assistant("look", 5, calls=["c1"]), result("c1", 5, "walrus")]
        u2 = [user("penguin", 5)]
        view = [sy, s] + turn(7)
        # Ranked u2 first, but u1 comes first in the conversation.
        a = select(view, 1000, [unit(u2, [20]), unit(u1, [3, 4])])
        self.assertEqual(ids(a.messages), [sy.id, s.id] + ids(u1) + ids(u2) + ids(view[2:]))
        self.assertEqual(tool_pair_violations(a.messages), [])

    def test_a_unit_that_does_not_fit_is_skipped_whole_and_smaller_ones_still_come(self):
        big = [assistant("look", 10, calls=["c1"]), result("c1", 500, "walrus")]
        small = [user("walrus too", 10)]
        view = turn(5)
        a = select(view, 100, [unit(big, [1, 2]), unit(small, [3])])
        self.assertEqual(ids(a.recalled), ids(small))
        self.assertLessEqual(a.estimated_tokens, 100)

    def test_a_recalled_message_of_the_view_is_absorbed_by_the_fresh_turns(self):
        view = turn(0, topic="walrus") + turn(1) + turn(2)
        # The walrus turn's user message is recalled; then the budget reaches its whole turn.
        a = select(view, 120, [unit([view[0]], [1])], share=0.3)
        self.assertEqual(ids(a.messages), ids(view))
        self.assertEqual(a.recalled, [])

    def test_a_view_copy_is_preferred_to_the_indexed_one(self):
        current = user("walrus, rewritten", 12)
        stale = types_pb2.Message()
        stale.CopyFrom(current)
        stale.content[0].text.text = "walrus"
        view = [current] + turn(1) + turn(2)
        a = select(view, 90, [unit([stale], [1])], share=0.5)
        self.assertIs(a.messages[0], current)

    def test_the_view_copy_of_a_message_whose_call_the_index_stripped_is_repaired_again(self):
        # Turn 1's call was aborted: the index recalls its message without the call, and the
        # view's copy (with the call) must not bring it back, alone before turn 2 which the budget
        # left after recall then takes whole.
        aborted = assistant("walrus plan", 100, calls=["x"])
        stripped = types_pb2.Message()
        stripped.CopyFrom(aborted)
        del stripped.content[1:]
        second = [user("second"), assistant("go", calls=["x"]), result("x", 200), assistant("done")]
        view = [user("start", 500), aborted] + second + turn(3) + turn(4)
        a = select(view, 450, [unit([stripped], [2])])
        self.assertEqual(ids(a.messages), [aborted.id] + ids(view[2:]))
        self.assertEqual(tool_call_ids(a.messages[0]), [])
        self.assertEqual(tool_pair_violations(a.messages), [])
        self.assertEqual((ids(a.recalled), a.estimated_tokens), ([aborted.id], 100 + 230 + 80))

    def test_a_unit_reaching_into_the_turns_added_after_recall_leaves_the_recalled_section(self):
        # The view starts mid-turn: the call before it (x) is answered by the fragment's second
        # result (the first answers the fragment's own call of x), which the view's repair drops.
        before = assistant("outer", calls=["x"])
        fragment = [assistant("inner", calls=["x"]), result("x"), result("x", text="walrus"), assistant("done")]
        view = fragment + turn(1) + turn(2)
        plan = plan_fresh(view, 200, share=0.5)
        self.assertEqual(ids(plan.tail), ids(view[4:]))
        # Recalled, then the fragment is taken: shown before it, the result would be out of order.
        a = complete(plan, [unit([before, fragment[2]], [1, 4])], {m.id: m for m in view})
        self.assertEqual(ids(a.messages), ids(fragment[:2] + fragment[3:] + view[4:]))
        self.assertEqual((a.recalled, a.estimated_tokens), ([], 110))
        self.assertEqual(tool_pair_violations(a.messages), [])

    def test_no_units_no_recall_and_the_overflow_ignores_them(self):
        s = summary(tokens=80)
        a = select([s, user("big", 50)], 100, [unit([user("x", 1)], [1])])
        self.assertTrue(a.overflow)
        self.assertEqual(a.recalled, [])


class NothingLeftAfterTheRepair(unittest.TestCase):
    """No user message, and every other message an orphan: once raised IndexError (newest[0])."""

    def test_a_view_of_one_orphan_result_plans_an_empty_tail(self):
        plan = plan_fresh([result("x", 10)], 100)
        self.assertEqual((plan.tail, plan.older_turns, plan.used, plan.overflow, plan.partial_turn, plan.whole_turns), ([], [], 0, False, False, 0))
        # With no tail there is no bound to recall before: the engine asks the index for no units.
        a = complete(plan, [])
        self.assertEqual((a.messages, a.estimated_tokens, a.overflow), ([], 0, False))
        self.assertEqual(select([result("x", 10)], None).messages, [])

    def test_only_the_pinned_messages_are_kept(self):
        sy, s = system(tokens=20), summary(tokens=30)
        view = [sy, s, result("a", 10), result("b", 500)]
        a = select(view, 100)
        self.assertEqual(ids(a.messages), [sy.id, s.id])
        self.assertEqual((a.estimated_tokens, a.overflow, a.summary_kept), (50, False, True))
        # As for an empty history: pinned messages over the budget are the answer, flagged.
        a = select(view, 40)
        self.assertEqual((ids(a.messages), a.overflow), ([sy.id, s.id], True))

    def test_a_repaired_fragment_before_a_turn_is_left_out(self):
        view = [result("gone", 10)] + turn(0)
        plan = plan_fresh(view, 1000)
        self.assertEqual((ids(plan.tail), plan.older_turns, plan.whole_turns), (ids(view[1:]), [], 1))
        self.assertEqual(ids(complete(plan, []).messages), ids(view[1:]))


class RandomizedInvariants(unittest.TestCase):
    """Views of random sessions (plain turns, and agents reusing tool-call ids, aborting and nesting
    calls), units from a real index of the whole session, random budgets and shares."""

    def setUp(self):
        self.t = TempIndex()

    def tearDown(self):
        self.t.cleanup()

    def test_budget_tool_pairs_order_and_latest_user(self):
        rng = random.Random(1234)
        for case in range(400):
            session = "c%d" % case
            view = [system(tokens=rng.randint(1, 30))] if rng.random() < 0.5 else []
            if rng.random() < 0.5:
                view.append(summary(tokens=rng.randint(1, 80)))
            history = []
            for n in range(rng.randint(1, 8)):
                if rng.random() < 0.5:
                    history += agentic_turn(rng, 100 * case + n)
                else:
                    history += turn(100 * case + n, tool_calls=rng.randint(0, 3), tokens=rng.randint(1, 30), result_tokens=rng.randint(1, 200), parallel=rng.random() < 0.3, topic="walrus")
            self.t.index.ingest(session, history)
            cut = rng.randint(0, len(history) - 1)
            mode = rng.random()
            if mode < 0.6:
                while cut > 0 and history[cut].role != types_pb2.ROLE_USER:
                    cut -= 1
            # Otherwise the view starts mid-turn, maybe at a result whose call is cut away; and
            # sometimes it holds no user message at all, only results whose calls are gone.
            kept = history[cut:]
            if mode >= 0.9:
                kept = [m for m in kept if m.role == types_pb2.ROLE_TOOL_RESULT][:3]
            view += kept
            ords = {m.id: i for i, m in enumerate(history)}
            budget = rng.choice([None, rng.randint(10, 2000)])
            plan = plan_fresh(view, budget, rng.choice([0.3, 0.55, 0.8]))
            units = []
            if plan.tail and not plan.overflow:
                # As the engine asks: units before the fresh tail, best first (or any order).
                bound = self.t.index.ords(session, [plan.tail[0].id])[plan.tail[0].id]
                units = self.t.index.recall_units(session, '"walrus" OR "ok"', bound, limit=rng.choice([5, 64, 10_000]))
                if rng.random() < 0.5:
                    rng.shuffle(units)
            a = complete(plan, units, {m.id: m for m in view}, max_units=8 if budget is None else None)
            where = "case %d" % case
            if budget is not None and not a.overflow:
                self.assertLessEqual(a.estimated_tokens, budget, where)
            self.assertEqual(a.estimated_tokens, sum(m.token_count for m in a.messages), where)
            self.assertEqual(tool_pair_violations(a.messages), [], where)
            rest = [m for m in a.messages if m.role != types_pb2.ROLE_SYSTEM and m.metadata.get("contextd.kind") != "compaction_summary"]
            order = [ords[m.id] for m in rest]
            self.assertEqual(order, sorted(order), where)
            self.assertEqual(len(set(ids(a.messages))), len(a.messages), where)
            turns = paired_turns(kept)
            if not turns:
                # Nothing but orphans: answered as an empty history, the pinned messages.
                self.assertEqual(rest, [], where)
                continue
            if not a.partial_turn and not a.overflow:
                self.assertEqual(rest[-1].id, turns[-1][-1].id, where)
            latest_user = [m for m in kept if m.role == types_pb2.ROLE_USER][-1:]
            self.assertTrue(set(ids(latest_user)) <= set(ids(a.messages)), where)
            if rest:
                self.assertNotEqual(rest[0].role, types_pb2.ROLE_TOOL_RESULT, where)

if __name__ == "__main__":
    unittest.main()
