"""The index against a real SQLite file: ingest, transcript sync (order, rewrites, hidden entries),
search scoped to a session, recall units with whole tool pairs, restart, concurrent writers."""

import random
import threading
import unittest

from .helpers import TempIndex, agentic_turn, assistant, entries, ids, result, system, tool_call_ids, tool_pair_violations, turn, types_pb2, user

from contextd.turns import paired_turns, split_turns  # noqa: E402

from fts_query import fts_query  # noqa: E402
from message_text import searchable_text  # noqa: E402


class IndexTest(unittest.TestCase):
    def setUp(self):
        self.t = TempIndex()
        self.index = self.t.index

    def tearDown(self):
        self.t.cleanup()

    def test_a_turns_block_is_stored_per_session_turn_and_view_and_replaced_whole(self):
        msgs = [user("walrus one"), assistant("walrus two")]
        self.index.ingest("s", msgs)
        self.index.set_block("s", "u1", "v1", "the prompt", [msgs[1].id, msgs[0].id])
        self.assertEqual(self.index.blocks("s", ["u1", "u2"], "v1"), {"u1": ("the prompt", [msgs[1].id, msgs[0].id])})
        # Another view (the host compacted since) or another session: none.
        self.assertEqual(self.index.blocks("s", ["u1"], "v2"), {})
        self.assertEqual(self.index.blocks("other", ["u1"], "v1"), {})
        self.index.set_block("s", "u1", "v1", "another prompt", [])
        self.assertEqual(self.index.blocks("s", ["u1"], "v1"), {"u1": ("another prompt", [])})
        # The stored messages, decoded, by entry id.
        self.assertEqual(self.index.messages("s", [msgs[0].id, "missing"]), {msgs[0].id: msgs[0]})

    def test_forget_purges_the_session_from_every_table_and_from_the_file(self):
        self.index.ingest("gone", [user("the word zanzibarquux is secret"), assistant("zanzibarquux noted")])
        self.index.set_block("gone", "u1", "v1", "zanzibarquux?", [])
        self.index.ingest("kept", [user("the word fjordwombat stays")])
        self.assertTrue(self.index.forget("gone"))
        self.assertEqual(self.index.count("gone"), 0)
        self.assertEqual(self.index.blocks("gone", ["u1"], "v1"), {})
        self.assertEqual(self.units("zanzibarquux", session="gone"), [])
        # Nothing left to purge: answered False, and the other session is untouched.
        self.assertFalse(self.index.forget("gone"))
        self.assertEqual(self.index.count("kept"), 1)
        self.index.close()
        with open(self.t.path, "rb") as f:
            data = f.read()
        self.assertNotIn(b"zanzibarquux", data)
        self.assertIn(b"fjordwombat", data)

    def units(self, prompt, before=None, session="s"):
        return self.index.recall_units(session, fts_query(prompt), before)

    def test_ingest_is_idempotent_and_ordered(self):
        msgs = turn(0) + turn(1)
        self.assertEqual(self.index.ingest("s", msgs[:3]), 3)
        self.assertEqual(self.index.ingest("s", msgs), len(msgs) - 3)
        self.assertEqual(self.index.ingest("s", msgs), 0)
        ords = self.index.ords("s", ids(msgs))
        self.assertEqual([ords[m.id] for m in msgs], list(range(1, len(msgs) + 1)))
        self.assertEqual(self.index.count("s"), len(msgs))
        self.assertFalse(self.index.is_synced("s"))

    def test_sync_sets_transcript_order_fills_gaps_and_removes_hidden(self):
        msgs = turn(0, topic="walrus") + turn(1)
        self.index.ingest("s", [msgs[0], msgs[-1]])  # a gap in between
        # seq counts compaction entries too: start at 10.
        res = self.index.sync_transcript("s", entries(msgs, first_seq=10, hidden={msgs[2].id}))
        self.assertEqual((res.imported, res.removed), (len(msgs) - 3, 0))
        self.assertTrue(self.index.is_synced("s"))
        ords = self.index.ords("s", ids(msgs))
        self.assertNotIn(msgs[2].id, ords)
        self.assertEqual(ords[msgs[0].id], 10)
        self.assertEqual(ords[msgs[-1].id], 10 + len(msgs) - 1)
        # Hidden later (a reset): removed from the index and from the search.
        res = self.index.sync_transcript("s", entries(msgs, first_seq=10, hidden={msgs[0].id}))
        self.assertEqual(res.removed, 1)
        self.assertEqual(self.units("walrus"), [])

    def test_a_rewritten_entry_replaces_the_indexed_copy(self):
        m = user("the deploy key is walrus")
        self.index.ingest("s", [m])
        changed = types_pb2.Message()
        changed.CopyFrom(m)
        del changed.content[:]
        changed.content.add().text.text = "the deploy key is penguin"
        entry = types_pb2.TranscriptEntry(id=m.id, seq=1, message=changed, revision=1)
        self.assertEqual(self.index.sync_transcript("s", [entry]).updated, 1)
        self.assertEqual(self.units("walrus"), [])
        [unit] = self.units("penguin")
        self.assertEqual(unit.messages[0].content[0].text.text, "the deploy key is penguin")

    def test_search_is_scoped_to_the_session_and_skips_system_messages(self):
        self.index.ingest("a", [user("zebra crossing in session a")])
        self.index.ingest("b", [user("zebra crossing in session b"), system("zebra rules")])
        [unit] = self.units("zebra", session="b")
        self.assertIn("session b", unit.messages[0].content[0].text.text)
        self.assertEqual(self.units("zebra", session="c"), [])

    def test_the_stored_message_comes_back_whole(self):
        m = assistant("reading the config", tokens=37, calls=["c1"])
        r = result("c1", tokens=120, text="port = 6432\npassword = quartz")
        self.index.ingest("s", [user("go"), m, r])
        [unit] = self.units("quartz password")
        self.assertEqual(unit.messages, [m, r])
        self.assertEqual(unit.tokens, 157)
        self.assertEqual(unit.ids, frozenset([m.id, r.id]))

    def test_a_matching_result_pulls_its_call_and_a_call_all_its_results(self):
        msgs = [user("start")] + [assistant("two at once", calls=["p1", "p2"]), result("p1", text="alpha"), result("p2", text="beta")]
        self.index.ingest("s", msgs)
        for word in ("alpha", "beta", "two"):
            [unit] = self.units(word)
            self.assertEqual(ids(unit.messages), ids(msgs[1:]), word)
        # One unit, however many of its messages match.
        self.assertEqual(len(self.units("alpha beta two")), 1)

    def test_no_result_without_its_call_and_no_call_without_its_results(self):
        orphan = result("gone", text="orphaned walrus")
        unanswered = assistant("calling walrus tool", calls=["never"])
        only_a_call = assistant("", calls=["never2"])
        self.index.ingest("s", [user("x"), orphan, unanswered, only_a_call])
        # The call is stripped, as contextd.turns.pair_tools strips it from the view; a message that
        # was only an unanswered call is left out.
        for query in ("walrus", "read_file"):
            [unit] = self.units(query)
            self.assertEqual(ids(unit.messages), [unanswered.id], query)
            self.assertEqual(tool_call_ids(unit.messages[0]), [], query)
            self.assertEqual(unit.messages[0].content[0].text.text, "calling walrus tool", query)
            self.assertEqual(unit.tokens, unanswered.token_count, query)

    def test_repeated_call_ids_pair_with_the_nearest(self):
        first = [assistant("a", calls=["call_1"]), result("call_1", text="first walrus")]
        second = [assistant("b", calls=["call_1"]), result("call_1", text="second penguin")]
        self.index.ingest("s", [user("1")] + first + [user("2")] + second)
        [unit] = self.units("penguin")
        self.assertEqual(ids(unit.messages), ids(second))
        [unit] = self.units("walrus")
        self.assertEqual(ids(unit.messages), ids(first))

    def test_an_aborted_call_is_not_paired_with_a_later_turns_result(self):
        # Call x aborted in turn 1, then call x and its result in turn 2. Paired by id alone, the
        # unit would be [aborted call, turn 2's result], and with turn 2 kept whole in the fresh
        # tail the aborted call would be left alone in the recalled section.
        aborted = assistant("walrus plan", calls=["x"])
        later = [assistant("second try", calls=["x"]), result("x", text="penguin output")]
        self.index.ingest("s", [user("1"), aborted, user("2")] + later)
        [unit] = self.units("walrus")
        self.assertEqual(ids(unit.messages), [aborted.id])
        self.assertEqual(tool_call_ids(unit.messages[0]), [])
        [unit] = self.units("penguin")
        self.assertEqual(ids(unit.messages), ids(later))

    def test_a_result_answering_no_call_in_its_turn_is_not_recalled(self):
        # x was called (and answered) in turn 1 only: turn 2's result of x answers nothing.
        self.index.ingest("s", [user("1"), assistant("a", calls=["x"]), result("x", text="first"), user("2"), result("x", text="stray walrus")])
        self.assertEqual(self.units("walrus"), [])

    def test_repeated_call_ids_within_a_turn_pair_by_position(self):
        # Two open calls of one id: the first result answers the newer call (pair_tools' rule).
        outer = assistant("outer", calls=["x"])
        inner = assistant("inner", calls=["x"])
        r_inner, r_outer = result("x", text="walrus"), result("x", text="penguin")
        self.index.ingest("s", [user("go"), outer, inner, r_inner, r_outer])
        [unit] = self.units("walrus")
        self.assertEqual(ids(unit.messages), [inner.id, r_inner.id])
        [unit] = self.units("penguin")
        self.assertEqual(ids(unit.messages), [outer.id, r_outer.id])

    def test_a_partly_answered_call_message_comes_with_its_answered_results(self):
        both = assistant("two calls", calls=["x", "y"])
        rx = result("x", text="walrus")
        self.index.ingest("s", [user("go"), both, rx, user("next")])
        [unit] = self.units("walrus")
        self.assertEqual(ids(unit.messages), [both.id, rx.id])
        self.assertEqual(tool_call_ids(unit.messages[0]), ["x"])
        self.assertEqual(tool_pair_violations(unit.messages), [])

    def test_before_ord_bounds_the_units(self):
        msgs = [user("walrus one"), user("walrus two"), user("walrus three")]
        self.index.ingest("s", msgs)
        self.assertEqual(sorted(u.ords[0] for u in self.units("walrus", before=3)), [1, 2])

    def test_best_match_first(self):
        self.index.ingest("s", [user("walrus"), user("walrus penguin zebra"), user("penguin")])
        best = self.units("walrus penguin zebra")[0]
        self.assertIn("zebra", best.messages[0].content[0].text.text)

    def test_stemming_and_diacritics(self):
        self.index.ingest("s", [user("the tests failed on the café server")])
        self.assertEqual(len(self.units("failing test")), 1)
        self.assertEqual(len(self.units("cafe")), 1)

    def test_survives_a_restart(self):
        msgs = turn(0, topic="walrus")
        self.index.ingest("s", msgs)
        self.index.sync_transcript("s", entries(msgs))
        self.index = self.t.reopen()
        self.assertTrue(self.index.is_synced("s"))
        [unit] = self.units("walrus")
        self.assertEqual(unit.messages[0], msgs[0])
        self.assertEqual(self.index.ingest("s", msgs), 0)

    def test_concurrent_writers_from_threads(self):
        errors = []

        def write(n):
            try:
                for i in range(20):
                    self.index.ingest("s%d" % (n % 2), [user("message %d %d walrus" % (n, i))])
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])
        self.assertEqual(self.index.count("s0") + self.index.count("s1"), 120)
        ords = self.index.ords("s0", [])
        self.assertEqual(ords, {})

    def test_searchable_text(self):
        m = assistant("let me look", calls=["c9"])
        self.assertIn("read_file", searchable_text(m))
        self.assertIn('"path"', searchable_text(m))
        self.assertIn("read_file", searchable_text(result("c9", text="contents")))


class UnitsAgreeWithTheViewsPairing(unittest.TestCase):
    """On random sessions whose agent reuses tool-call ids, aborts calls and nests them, the units
    are exactly the view's repaired turns (contextd.turns.paired_turns) cut into a call with its
    results and single messages: every message in one unit, each unit within one turn, in order,
    and well formed."""

    def test_random_sessions_with_reused_ids(self):
        rng = random.Random(4321)
        t = TempIndex()
        try:
            for case in range(150):
                session = "r%d" % case
                history = []
                if rng.random() < 0.3:  # a fragment before the first user message
                    history += agentic_turn(rng, 0)[1:]
                for n in range(1, rng.randint(2, 6)):
                    history += agentic_turn(rng, n)
                t.index.ingest(session, history)
                where = "case %d" % case
                units = t.index.recall_units(session, '"walrus"', None, limit=10_000)
                turn_of = {m.id: k for k, turn in enumerate(split_turns(history)) for m in turn}
                ord_of = {m.id: i + 1 for i, m in enumerate(history)}
                got = {}
                for unit in units:
                    self.assertEqual(tool_pair_violations(unit.messages), [], where)
                    self.assertEqual(len({turn_of[m.id] for m in unit.messages}), 1, where)
                    self.assertEqual(unit.ords, sorted(unit.ords), where)
                    self.assertEqual(unit.ords, [ord_of[m.id] for m in unit.messages], where)
                    self.assertEqual(unit.ids, frozenset(ids(unit.messages)), where)
                    for m in unit.messages:
                        self.assertNotIn(m.id, got, where)
                        got[m.id] = m
                want = {m.id: m for turn in paired_turns(history) for m in turn}
                self.assertEqual(set(got), set(want), where)
                for i, m in want.items():
                    self.assertEqual(got[i], m, where)  # the same repair: the same calls stripped
        finally:
            t.cleanup()


if __name__ == "__main__":
    unittest.main()
