"""build_request: a Client method's keywords become its request proto, or a Python error naming
`Request.field` — before anything is sent."""

from __future__ import annotations

import unittest

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import Role, SessionRef, SubagentContextMode
from contextd import messages as m
from contextd.request_fields import build_request
from contextd.v1 import session_pb2 as S


class BuildRequestTest(unittest.TestCase):
    def test_keywords_become_the_request(self) -> None:
        req = build_request(S.AssembleRequest, None, {"session": "chat-42", "token_budget": 32000}, "assemble")
        self.assertEqual(req, S.AssembleRequest(session=SessionRef(session_id="chat-42"), token_budget=32000))

    def test_every_session_ref_field_is_coerced(self) -> None:
        req = build_request(
            S.PrepareSubagentSpawnRequest,
            None,
            {"parent": ("p", "coder"), "child": {"session_id": "c"},
             "context_mode": SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK},
            "prepare_subagent_spawn",
        )
        self.assertEqual(req.parent, SessionRef(session_id="p", agent_id="coder"))
        self.assertEqual(req.child, SessionRef(session_id="c"))
        self.assertEqual(req.context_mode, SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK)

    def test_messages_take_protos_and_dicts(self) -> None:
        req = build_request(
            S.AppendMessagesRequest,
            None,
            {"session": "s", "messages": [m.user("hi"), {"role": Role.ROLE_ASSISTANT, "content": [{"text": {"text": "yo"}}]}],
             "idempotency_key": "turn-1"},
            "append_messages",
        )
        self.assertEqual([x.role for x in req.messages], [Role.ROLE_USER, Role.ROLE_ASSISTANT])
        self.assertEqual(m.text_of(req.messages[1]), "yo")
        self.assertEqual(req.idempotency_key, "turn-1")

    def test_optional_fields_keep_an_explicit_false(self) -> None:
        # auto_compact is `optional bool`: False is not the same as unset (the server's default is on).
        req = build_request(S.AssembleRequest, None, {"session": "s", "token_budget": 1, "auto_compact": False}, "assemble")
        self.assertTrue(req.HasField("auto_compact"))
        self.assertFalse(req.auto_compact)
        unset = build_request(S.AssembleRequest, None, {"session": "s", "auto_compact": None}, "assemble")
        self.assertFalse(unset.HasField("auto_compact"))

    def test_no_fields_is_the_empty_request(self) -> None:
        self.assertEqual(build_request(S.ListSessionsRequest, None, {}, "list_sessions"), S.ListSessionsRequest())

    def test_a_request_proto_is_sent_as_it_is(self) -> None:
        req = S.GetSessionRequest(session=SessionRef(session_id="s"))
        self.assertIs(build_request(S.GetSessionRequest, req, {}, "get_session"), req)

    def test_a_request_of_another_type_is_refused(self) -> None:
        with self.assertRaisesRegex(TypeError, r"get_session\(\) takes a GetSessionRequest, got AssembleRequest"):
            build_request(S.GetSessionRequest, S.AssembleRequest(), {}, "get_session")  # type: ignore[arg-type]

    def test_a_request_and_keywords_together_are_refused(self) -> None:
        with self.assertRaisesRegex(TypeError, "not both"):
            build_request(S.AssembleRequest, S.AssembleRequest(), {"token_budget": 1}, "assemble")

    def test_an_unknown_field_is_named_with_the_ones_that_exist(self) -> None:
        with self.assertRaises(TypeError) as caught:
            build_request(S.AssembleRequest, None, {"budget": 1}, "assemble")
        self.assertIn("assemble() got an unknown field 'budget'", str(caught.exception))
        self.assertIn("token_budget", str(caught.exception))

    def test_a_bad_value_names_request_and_field(self) -> None:
        with self.assertRaisesRegex(TypeError, r"^AssembleRequest\.token_budget: "):
            build_request(S.AssembleRequest, None, {"token_budget": "many"}, "assemble")
        with self.assertRaisesRegex(ValueError, r"^AssembleRequest\.token_budget: "):
            build_request(S.AssembleRequest, None, {"token_budget": -1}, "assemble")
        with self.assertRaisesRegex(TypeError, r"^session: "):
            build_request(S.AssembleRequest, None, {"session": 42}, "assemble")


if __name__ == "__main__":
    unittest.main()
