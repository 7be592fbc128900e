"""The budgeted layout (selection.py), pure: pinned first, the view's turns in order, each turn's
recalled block just before its user message (an upcoming message's after the newest turn), the
older part dropped in steps, never over the budget, tool pairs intact; randomized invariants."""

import random
import unittest

from .helpers import TempIndex, agentic_turn, ids, result, summary, system, tool_pair_violations, turn, types_pb2, user

from contextd.turns import paired_turns  # noqa: E402

from index import RecallUnit  # noqa: E402
from selection import UPCOMING, choose_block, complete, plan_layout  # noqa: E402


def unit(messages, score=-1.0):
    return RecallUnit(list(messages), list(range(len(messages))), sum(m.token_count for m in messages), score, frozenset(m.id for m in messages))


def select(view, budget, blocks=None, units=(), reserve=0, upcoming=False, block_share=0.2, step_share=0.25):
    layout = plan_layout(view, budget, blocks or {}, reserve, upcoming, True, block_share, step_share)
    block = choose_block(units, layout.room, layout.shown_ids(), {m.id: m for m in view}) if layout.anchor else []
    return layout, complete(layout, block)


class Layout(unittest.TestCase):
    def test_the_whole_view_in_order_when_it_fits(self):
        sy, s = system(tokens=20), summary(tokens=50)
        view = [sy, s] + turn(0) + turn(1) + turn(2)
        layout, a = select(view, 1000)
        self.assertEqual(ids(a.messages), ids(view))
        self.assertEqual((a.estimated_tokens, a.whole_turns, a.overflow, a.recalled, a.dropped_turns), (190, 3, False, [], 0))
        self.assertTrue(a.summary_kept)

    def test_everything_without_a_budget(self):
        view = [summary()] + turn(0) + turn(1)
        layout, a = select(view, None, units=[unit([user("walrus", 5)])])
        self.assertEqual(ids(a.messages)[-4:], ids(view[-4:]))
        self.assertEqual(len(a.block), 1)

    def test_a_turns_block_sits_just_before_its_user_message(self):
        old = user("planted fact walrus", 30)
        view = turn(0) + turn(1)
        layout, a = select(view, 1000, units=[unit([old])])
        self.assertEqual(layout.anchor, view[4].id)
        self.assertEqual(ids(a.messages), ids(view[:4]) + [old.id] + ids(view[4:]))
        self.assertEqual(ids(a.block), [old.id])

    def test_stored_blocks_of_older_turns_stay_where_they_were(self):
        a0, a1 = user("fact one", 7), user("fact two", 9)
        view = turn(0) + turn(1) + turn(2)
        blocks = {view[0].id: [a0], view[4].id: [a1]}
        layout, a = select(view, 1000, blocks)
        self.assertEqual(ids(a.messages), [a0.id] + ids(view[:4]) + [a1.id] + ids(view[4:]))
        self.assertEqual(ids(a.recalled), [a0.id, a1.id])
        self.assertEqual(a.estimated_tokens, 120 + 16)

    def test_an_upcoming_messages_block_goes_after_the_newest_turn_which_keeps_its_own(self):
        own, new = user("fact one", 7), user("fact two", 9)
        view = turn(0) + turn(1)
        layout, a = select(view, 1000, {view[4].id: [own]}, units=[unit([new])], upcoming=True)
        self.assertEqual(layout.anchor, UPCOMING)
        self.assertEqual(ids(a.messages), ids(view[:4]) + [own.id] + ids(view[4:]) + [new.id])

    def test_the_block_takes_at_most_its_share_whole_units_best_first_none_repeated(self):
        view = turn(0) + turn(1)  # 80 tokens
        big, small, shown = user("big", 30), user("small", 15), view[1]
        layout, a = select(view, 200, units=[unit([big]), unit([shown]), unit([small])], block_share=0.2)
        self.assertEqual(layout.room, 40)
        self.assertEqual(ids(a.block), [big.id])  # small does not fit what big leaves; the shown one is never repeated
        layout, a = select(view, 200, units=[unit([small]), unit([big])], block_share=0.2)
        self.assertEqual(ids(a.block), [small.id])

    def test_the_older_part_is_dropped_in_steps_and_stays_put_between_them(self):
        view = [summary(tokens=40)]
        for n in range(6):
            view += turn(n)  # 40 tokens each
        # budget 300: room wanted 0.2 * 260 = 52; the view (280) leaves 20 < half of it, so the
        # oldest turns go until at least one step (0.25 * 260 = 65) is dropped: two turns (80).
        layout, a = select(view, 300, block_share=0.2)
        self.assertEqual((a.dropped_turns, layout.room, a.estimated_tokens), (2, 52, 200))
        self.assertEqual(ids(a.messages), [view[0].id] + ids(view[9:]))
        # A few more tokens: the overflow within the same step, the same start, append-only.
        layout, c = select(view + [user("short", 5)], 300, block_share=0.2)
        self.assertEqual(ids(c.messages)[: len(a.messages)], ids(a.messages))
        # A whole turn more: 320 + 52 - 300 = 72 crosses the step, two steps (130) take four turns.
        layout, b = select(view + turn(6), 300, block_share=0.2)
        self.assertEqual(b.dropped_turns, 4)

    def test_a_smaller_room_rather_than_a_step_while_half_of_it_is_left(self):
        view = turn(0) + turn(1) + turn(2)  # 120
        layout, a = select(view, 150, block_share=0.4)  # wants 60, 30 left: half, enough
        self.assertEqual((layout.room, a.dropped_turns), (30, 0))

    def test_an_oversized_newest_turn_is_cut_at_a_tool_pair_boundary_without_a_block(self):
        view = turn(0) + turn(1, tool_calls=3, result_tokens=100)
        newest = view[4:]
        layout, a = select(view, 140, units=[unit([user("walrus", 1)])])
        self.assertEqual(ids(a.messages), [newest[0].id] + ids(newest[-3:]))
        self.assertTrue(a.partial_turn)
        self.assertEqual((layout.anchor, a.block), ("", []))
        self.assertEqual(tool_pair_violations(a.messages), [])

    def test_overflow_only_when_pinned_and_latest_user_do_not_fit(self):
        s = summary(tokens=80)
        latest = user("big", 50)
        layout, a = select([s] + turn(0) + [latest], 100)
        self.assertTrue(a.overflow)
        self.assertEqual(ids(a.messages), [s.id, latest.id])
        self.assertEqual(a.estimated_tokens, 130)
        self.assertFalse(select([s] + turn(0) + [latest], 130)[1].overflow)

    def test_a_view_copy_is_preferred_and_repaired_again(self):
        view = turn(0) + turn(1)
        indexed = user("walrus old", 5)
        newer = user("walrus rewritten", 6)
        newer.id = indexed.id
        layout = plan_layout(view + [], 1000, {}, 0)
        block = choose_block([unit([indexed])], layout.room, layout.shown_ids(), {indexed.id: newer})
        self.assertEqual(block[0].content[0].text.text, "walrus rewritten")


class NothingLeftAfterTheRepair(unittest.TestCase):
    def test_a_view_of_one_orphan_result_is_an_empty_history(self):
        layout, a = select([result("x", 10)], 100)
        self.assertEqual((a.messages, a.estimated_tokens, a.overflow, layout.anchor), ([], 0, False, ""))

    def test_only_the_pinned_messages_are_kept(self):
        sy, s = system(tokens=20), summary(tokens=30)
        view = [sy, s, result("a", 10), result("b", 500)]
        self.assertEqual(ids(select(view, 100)[1].messages), [sy.id, s.id])
        layout, a = select(view, 40)
        self.assertEqual((ids(a.messages), a.overflow), ([sy.id, s.id], True))


class RandomizedInvariants(unittest.TestCase):
    """Views of random sessions (plain turns, and agents reusing tool-call ids, aborting and nesting
    calls), units from a real index of the whole session, stored blocks, random budgets and shares."""

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
            kept = history[cut:]
            if mode >= 0.9:
                kept = [m for m in kept if m.role == types_pb2.ROLE_TOOL_RESULT][:3]
            view += kept
            ords = {m.id: i for i, m in enumerate(history)}
            budget = rng.choice([None, rng.randint(10, 2000)])
            units = self.t.index.recall_units(session, '"walrus" OR "ok"', None, limit=rng.choice([5, 64, 10_000]))
            # Stored blocks of older turns: units recalled earlier, each before its turn.
            anchors = [m.id for m in kept if m.role == types_pb2.ROLE_USER]
            blocks = {}
            for a in anchors[:-1]:
                if rng.random() < 0.5 and units:
                    blocks[a] = list(rng.choice(units).messages)
            upcoming = rng.random() < 0.2
            shares = rng.choice([0.05, 0.2, 0.5]), rng.choice([0.1, 0.25, 0.5])
            layout = plan_layout(view, budget, blocks, rng.choice([0, 20]), upcoming, rng.random() < 0.8, *shares)
            block = []
            if layout.anchor:
                block = choose_block(units, layout.room, layout.shown_ids(), {m.id: m for m in view}, 8 if budget is None else None)
            a = complete(layout, block)
            where = "case %d" % case
            if budget is not None and not a.overflow:
                self.assertLessEqual(a.estimated_tokens, budget, where)
            self.assertEqual(a.estimated_tokens, sum(m.token_count for m in a.messages), where)
            recalled = {id(m) for m in a.recalled}
            # Tool pairs intact in the conversation part and in each block (blocks are whole units).
            conversation = [m for m in a.messages if id(m) not in recalled]
            self.assertEqual(tool_pair_violations(conversation), [], where)
            self.assertEqual(tool_pair_violations(a.block), [], where)
            rest = [m for m in conversation if m.role != types_pb2.ROLE_SYSTEM and m.metadata.get("contextd.kind") != "compaction_summary"]
            order = [ords[m.id] for m in rest]
            self.assertEqual(order, sorted(order), where)
            self.assertEqual(len(set(ids(a.block))), len(a.block), where)
            self.assertFalse(set(ids(a.block)) & set(ids(conversation)), where)
            turns = paired_turns(kept)
            if not turns:
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
