"""keep_messages: an Assemble answer by reference (kept_entry_ids) when the shape allows it, else the echo form."""

from __future__ import annotations

import unittest

from contextd.engine import keep_messages
from contextd.v1 import engine_pb2, types_pb2


def message(id_: str, text: str, tokens: int = 3) -> types_pb2.Message:
    m = types_pb2.Message(id=id_, role=types_pb2.ROLE_USER, token_count=tokens)
    m.content.add().text.text = text
    return m


class KeepMessagesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.req = engine_pb2.ContextEngineServiceAssembleRequest(messages=[message(f"e{i}", f"m{i}") for i in range(5)])

    def test_added_first_then_kept_by_id(self):
        note = message("", "a note")
        answer = keep_messages(self.req, [note, self.req.messages[1], self.req.messages[3]])
        self.assertEqual(answer["kept_entry_ids"], ["e1", "e3"])
        self.assertEqual(answer["messages"], [note])

    def test_every_message_kept(self):
        answer = keep_messages(self.req, list(self.req.messages))
        self.assertEqual((answer["messages"], answer["kept_entry_ids"]), ([], [f"e{i}" for i in range(5)]))

    def test_other_shapes_echo(self):
        edited = message("e2", "changed")
        for chosen in (
            [self.req.messages[3], self.req.messages[1]],  # out of the request's order
            [self.req.messages[1], message("", "after a kept one")],  # an added message after a kept one
            [self.req.messages[1], edited],  # a request message changed
            [self.req.messages[1], self.req.messages[1]],  # twice
        ):
            answer = keep_messages(self.req, chosen)
            self.assertNotIn("kept_entry_ids", answer)
            self.assertEqual(answer["messages"], chosen)


if __name__ == "__main__":
    unittest.main()
