"""contextd.turns: the turns and tool pairs the sample engines (window, recall) keep whole."""

from __future__ import annotations

import ast
import random
import unittest
from collections.abc import Sequence

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import messages as m
from contextd.turns import longest_fitting_tail, pair_tools, paired_turns, split_turns, tokens, tool_call_ids, total_tokens
from contextd.v1 import engine_pb2, types_pb2

Message = types_pb2.Message


def user(text: str, n: int = 10) -> Message:
    return m.user(text, id=text, token_count=n)


def call(mid: str, *ids: str, text: str = "", n: int = 10) -> Message:
    return m.assistant(text, tool_calls=[m.tool_call(cid, "read_file", {"path": "x"}) for cid in ids], id=mid, token_count=n)


def result(cid: str, n: int = 10) -> Message:
    return m.tool_result(cid, "read_file", "ok", id="r-" + cid, token_count=n)


def reply(mid: str, n: int = 10) -> Message:
    return m.assistant("done", id=mid, token_count=n)


def ids(messages: Sequence[Message]) -> list[str]:
    return [x.id for x in messages]


def violations(messages: Sequence[Message]) -> list[str]:
    """Every result after a call of its id not answered yet, every call answered (an oracle of its
    own, not pair_tools). Counted per id, because ids may repeat: which of two open calls of an id
    a result answers does not change whether the transcript is well formed."""
    open_calls: dict[str, int] = {}
    problems = []
    for i, x in enumerate(messages):
        if x.role == types_pb2.ROLE_TOOL_RESULT:
            if open_calls.get(x.tool_call_id, 0) > 0:
                open_calls[x.tool_call_id] -= 1
            else:
                problems.append(f"[{i}] answers {x.tool_call_id}, no unanswered call of it before")
        for b in x.content:
            if b.HasField("tool_call"):
                open_calls[b.tool_call.id] = open_calls.get(b.tool_call.id, 0) + 1
    problems.extend(f"{cid} unanswered ×{n}" for cid, n in sorted(open_calls.items()) if n > 0)
    return problems


class TokensTest(unittest.TestCase):
    def test_the_hosts_counts_unset_is_zero(self) -> None:
        self.assertEqual(tokens(user("a", 7)), 7)
        self.assertEqual(tokens(m.user("no count")), 0)
        self.assertEqual(total_tokens([user("a", 7), result("c", 30), m.user("x")]), 37)
        self.assertEqual(total_tokens(x for x in [user("a", 1), user("b", 2)]), 3)  # any iterable
        self.assertEqual(total_tokens([]), 0)

    def test_tool_call_ids_in_block_order_text_ignored(self) -> None:
        self.assertEqual(tool_call_ids(call("a", "c2", "c1", text="reading")), ["c2", "c1"])
        self.assertEqual(tool_call_ids(reply("b")), [])
        self.assertEqual(tool_call_ids(result("c1")), [])  # a result names its call in tool_call_id, not a block


class SplitTurnsTest(unittest.TestCase):
    def test_a_turn_starts_at_each_user_message(self) -> None:
        view = [user("u1"), call("a1", "c1"), result("c1"), reply("w1"), user("u2"), reply("w2"), user("u3")]
        turns = split_turns(view)
        self.assertEqual([ids(t) for t in turns], [["u1", "a1", "r-c1", "w1"], ["u2", "w2"], ["u3"]])
        self.assertIs(turns[0][0], view[0])  # the very same objects

    def test_messages_before_the_first_user_message_are_a_leading_fragment(self) -> None:
        view = [call("a0", "c0"), result("c0"), reply("w0"), user("u1"), reply("w1")]
        self.assertEqual([ids(t) for t in split_turns(view)], [["a0", "r-c0", "w0"], ["u1", "w1"]])
        self.assertEqual(split_turns([]), [])

    def test_a_requests_repeated_field_works_as_well_as_a_list(self) -> None:
        request = engine_pb2.ContextEngineServiceAssembleRequest(messages=[user("u1"), reply("w1"), user("u2")])
        self.assertEqual([len(t) for t in split_turns(request.messages)], [2, 1])


class PairToolsTest(unittest.TestCase):
    def test_a_well_formed_turn_is_returned_as_it_is(self) -> None:
        turn = [user("u"), call("a", "c1", "c2"), result("c1"), result("c2"), call("b", "c3"), result("c3"), reply("w")]
        self.assertIs(pair_tools(turn), turn)  # the same list: an engine can answer it by id
        plain = [user("u"), reply("w")]
        self.assertIs(pair_tools(plain), plain)

    def test_a_result_without_its_call_before_it_is_dropped(self) -> None:
        turn = [user("u"), result("gone"), reply("w")]
        self.assertEqual(ids(pair_tools(turn)), ["u", "w"])
        self.assertEqual(len(turn), 3)  # the input is not modified

    def test_an_aborted_call_is_removed_from_its_message_which_keeps_its_text_and_count(self) -> None:
        asked = call("a", "lost", "kept", text="trying", n=25)
        turn = [user("u"), asked, result("kept"), reply("w")]
        out = pair_tools(turn)
        self.assertEqual(ids(out), ["u", "a", "r-kept", "w"])
        self.assertEqual(violations(out), [])
        stripped = out[1]
        self.assertIsNot(stripped, asked)  # a copy; the other messages are the originals
        self.assertIs(out[0], turn[0])
        self.assertEqual(tool_call_ids(stripped), ["kept"])
        self.assertEqual(m.text_of(stripped).splitlines()[0], "trying")
        self.assertEqual(stripped.token_count, 25)  # the stored count: estimates stay upper bounds
        self.assertEqual(tool_call_ids(asked), ["lost", "kept"])  # the input is not modified

    def test_a_message_that_was_only_an_aborted_call_is_dropped(self) -> None:
        self.assertEqual(ids(pair_tools([user("u"), call("a", "lost")])), ["u"])

    def test_a_result_before_its_call_is_an_orphan_and_the_call_then_unanswered(self) -> None:
        turn = [user("u"), result("c1"), call("a", "c1", text="late"), reply("w")]
        out = pair_tools(turn)
        self.assertEqual(ids(out), ["u", "a", "w"])
        self.assertEqual(tool_call_ids(out[1]), [])
        self.assertEqual(violations(out), [])

    def test_pairs_are_matched_within_a_turn(self) -> None:
        # A result after the next user message does not answer a call of the turn before.
        view = [user("u1"), call("a", "c1", text="asking"), user("u2"), result("c1"), reply("w")]
        repaired = [pair_tools(t) for t in split_turns(view)]
        self.assertEqual([ids(t) for t in repaired], [["u1", "a"], ["u2", "w"]])
        self.assertEqual(tool_call_ids(repaired[0][1]), [])


class ReusedCallIdsTest(unittest.TestCase):
    """The host does not require unique tool-call ids (src/host/validate.ts), so pairs are matched
    by position: a result answers the nearest earlier unanswered call of its id."""

    def test_a_reused_id_whose_second_call_went_unanswered_loses_that_call_only(self) -> None:
        # Matched by id alone, the result "answered" both calls and the turn passed as well formed;
        # a cut could then keep the retry's call without any result.
        turn = [user("u"), call("a", "x", text="first"), result("x"), call("b", "x", text="retry"), reply("w")]
        out = pair_tools(turn)
        self.assertEqual(ids(out), ["u", "a", "r-x", "b", "w"])
        self.assertIs(out[1], turn[1])  # the answered call is the original
        self.assertEqual((tool_call_ids(out[1]), tool_call_ids(out[3])), (["x"], []))
        self.assertEqual(violations(out), [])
        for budget in range(0, 60):
            self.assertEqual(violations(longest_fitting_tail(out, budget)), [], budget)
        self.assertEqual(ids(pair_tools([user("u"), call("a", "x"), result("x"), call("b", "x")])), ["u", "a", "r-x"])

    def test_a_result_answers_the_nearest_unanswered_call(self) -> None:
        turn = [user("u"), call("a", "x", text="early"), call("b", "x"), result("x"), reply("w")]
        out = pair_tools(turn)
        self.assertEqual(ids(out), ["u", "a", "b", "r-x", "w"])
        self.assertEqual((tool_call_ids(out[1]), tool_call_ids(out[2])), ([], ["x"]))
        self.assertIs(out[2], turn[2])

    def test_a_second_result_for_one_call_is_dropped(self) -> None:
        second = m.tool_result("x", "read_file", "again", id="r2", token_count=10)
        out = pair_tools([user("u"), call("a", "x"), result("x"), second, reply("w")])
        self.assertEqual(ids(out), ["u", "a", "r-x", "w"])

    def test_well_formed_reuse_is_kept_and_cut_where_the_counts_balance(self) -> None:
        # Two open calls of x, then two results: the later result answers the earlier call.
        second = m.tool_result("x", "read_file", "again", id="r2", token_count=10)
        body = [call("a", "x"), call("b", "x"), result("x"), second, reply("w")]
        self.assertIs(pair_tools(body), body)
        # [b, r-x, r2, w] fits 40 but holds two results of x and one call: not a tail to cut.
        self.assertEqual(ids(longest_fitting_tail(body, 40)), ["w"])
        self.assertEqual(ids(longest_fitting_tail(body, 50)), ids(body))


class PairedTurnsTest(unittest.TestCase):
    def test_turns_repaired_and_the_empty_ones_left_out(self) -> None:
        view = [result("gone"), result("gone too"), user("u1"), call("a", "lost"), user("u2"), reply("w")]
        turns = paired_turns(view)
        self.assertEqual([ids(t) for t in turns], [["u1"], ["u2", "w"]])
        self.assertIs(turns[1][0], view[4])  # the very same objects
        self.assertEqual(paired_turns([result("gone")]), [])  # nothing of a conversation: as for []
        self.assertEqual(paired_turns([]), [])

    def test_a_fragment_with_something_left_stays_a_turn(self) -> None:
        view = [result("gone"), reply("w0"), user("u1")]
        self.assertEqual([ids(t) for t in paired_turns(view)], [["w0"], ["u1"]])


class LongestFittingTailTest(unittest.TestCase):
    # A turn's body: call(c1) result(c1) call(c2,c3) result(c2) result(c3) wrap-up, 10 tokens each.
    body = [call("a1", "c1"), result("c1"), call("a2", "c2", "c3"), result("c2"), result("c3"), reply("w")]

    def test_the_whole_body_when_it_fits_as_a_new_list(self) -> None:
        tail = longest_fitting_tail(self.body, 60)
        self.assertEqual(ids(tail), ids(self.body))
        self.assertIsNot(tail, self.body)
        self.assertEqual(ids(longest_fitting_tail(tuple(self.body), 1000)), ids(self.body))
        self.assertIsInstance(longest_fitting_tail(tuple(self.body), 1000), list)
        self.assertEqual(longest_fitting_tail(self.body, float("inf")), self.body)

    def test_never_cuts_a_tool_pair(self) -> None:
        expected = {0: [], 9: [], 10: ["w"], 20: ["w"], 30: ["w"], 40: ["a2", "r-c2", "r-c3", "w"], 50: ["a2", "r-c2", "r-c3", "w"]}
        for budget, want in expected.items():
            tail = longest_fitting_tail(self.body, budget)
            self.assertEqual(ids(tail), want, budget)
            self.assertEqual(violations(tail), [], budget)
            self.assertLessEqual(total_tokens(tail), budget)

    def test_a_whole_turn_is_cut_at_a_pair_boundary_too(self) -> None:
        turn = [user("u", 5)] + self.body
        self.assertEqual(ids(longest_fitting_tail(turn, 64)), ["a1", "r-c1", "a2", "r-c2", "r-c3", "w"])
        self.assertEqual(ids(longest_fitting_tail(turn, 65)), ["u"] + ids(self.body))
        self.assertEqual(longest_fitting_tail([], 10), [])

    def test_stops_at_the_first_message_that_does_not_fit(self) -> None:
        # A contiguous tail: a big message stops it even if older ones would fit.
        body = [reply("old", 1), call("big", "c", n=500), result("c"), reply("w")]
        self.assertEqual(ids(longest_fitting_tail(body, 100)), ["w"])


class RandomTurnsTest(unittest.TestCase):
    def test_repaired_turns_and_their_tails_keep_every_pair(self) -> None:
        rnd = random.Random(7)
        for case in range(300):
            view: list[Message] = []
            issued = 0  # a result may answer a past, a future or no call
            for k in range(rnd.randint(1, 30)):
                roll = rnd.random()
                if roll < 0.2:
                    view.append(user(f"u{case}-{k}", rnd.randint(0, 50)))
                elif roll < 0.5:
                    calls = [f"c{issued + j}" for j in range(rnd.randint(1, 3))]
                    issued += len(calls)
                    if issued > 3 and rnd.random() < 0.3:
                        calls[0] = f"c{rnd.randint(0, issued - 1)}"  # a reused id (the host allows them)
                    view.append(call(f"a{case}-{k}", *calls, text=rnd.choice(["", "t"]), n=rnd.randint(0, 50)))
                elif roll < 0.85:
                    view.append(result(f"c{rnd.randint(0, issued + 2)}", rnd.randint(0, 200)))
                else:
                    view.append(reply(f"w{case}-{k}", rnd.randint(0, 50)))
            turns = split_turns(view)
            self.assertEqual([x for t in turns for x in t], view)
            for turn in turns:
                fixed = pair_tools(turn)
                where = f"case {case}: {ids(turn)}"
                self.assertEqual(violations(fixed), [], where)
                self.assertLessEqual(len(fixed), len(turn), where)
                if not violations(turn):
                    self.assertIs(fixed, turn, where)
                budget = rnd.randint(0, 400)
                tail = longest_fitting_tail(fixed, budget)
                self.assertEqual(ids(tail), ids(fixed[len(fixed) - len(tail) :]), where)  # a tail
                self.assertLessEqual(total_tokens(tail), budget, where)
                self.assertEqual(violations(tail), [], where)


class ImportsTest(unittest.TestCase):
    def test_imports_only_the_generated_types(self) -> None:
        # Like contextd.pinned: an engine or a tool can use it without loading the client. Every
        # import statement, wherever it stands, so that a lazy one inside a function counts too.
        tree = ast.parse((_paths.PACKAGE_ROOT / "contextd" / "turns.py").read_text(encoding="utf-8"))
        names = {
            f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        allowed = {"__future__.annotations", "collections.abc.Iterable", "collections.abc.Sequence", "typing.TypeVar"}
        self.assertEqual(names - allowed, {"contextd.v1.types_pb2"})

if __name__ == "__main__":
    unittest.main()
