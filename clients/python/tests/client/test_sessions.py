"""session_ref: every spelling of a session a Client method accepts, and the ones it refuses."""

from __future__ import annotations

import unittest

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import SessionRef, session_ref


class SessionRefTest(unittest.TestCase):
    def test_a_session_ref_is_taken_as_it_is(self) -> None:
        ref = SessionRef(session_id="chat-42", session_key="k", agent_id="coder")
        self.assertIs(session_ref(ref), ref)

    def test_a_string_is_the_session_id(self) -> None:
        self.assertEqual(session_ref("chat-42"), SessionRef(session_id="chat-42"))

    def test_a_pair_is_session_id_and_agent_id(self) -> None:
        self.assertEqual(session_ref(("chat-42", "coder")), SessionRef(session_id="chat-42", agent_id="coder"))

    def test_a_dict_holds_session_ref_fields(self) -> None:
        self.assertEqual(
            session_ref({"session_id": "chat-42", "session_key": "main"}),
            SessionRef(session_id="chat-42", session_key="main"),
        )

    def test_refusals_name_the_field(self) -> None:
        cases = [
            (("a", "b", "c"), "child: a tuple must be (session_id, agent_id)"),
            (("a", 1), "child: a tuple must be (session_id, agent_id)"),
            ({"session": "a"}, "child: unknown SessionRef field(s) session"),
            ({"session_id": 42}, "child: child.session_id must be a string"),
            (42, "child: expected a SessionRef, a session id"),
            (None, "child: expected a SessionRef"),
        ]
        for value, message in cases:
            with self.subTest(value=value), self.assertRaises(TypeError) as caught:
                session_ref(value, "child")  # type: ignore[arg-type]
            self.assertIn(message, str(caught.exception))

    def test_ids_are_left_to_the_server_to_check(self) -> None:
        # contextd answers INVALID_ARGUMENT "session.session_id is required": one set of rules.
        self.assertEqual(session_ref(""), SessionRef())


if __name__ == "__main__":
    unittest.main()
