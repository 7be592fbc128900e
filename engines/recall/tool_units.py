"""Which indexed messages are recalled together: tool pairs within one turn of the index. Pure.

A recalled unit is one message, or a message making tool calls with the results that answer them.
The pairing is contextd.turns' (the rule the engine's view selection uses, ``pair_tools``), so that
a recalled unit and the fresh turns never disagree on who answers whom: pairs are matched within a
turn (a user message up to the next one; what precedes the session's first user message is a turn
too), and by position, because tool-call ids may repeat: a result answers the nearest earlier call
of its id that is still unanswered. A call matched across turns instead (an aborted call, then a
later call of the same id and its result) once made a unit of the aborted call and the later
result; with the later turn in the fresh tail, the call was left alone in the recalled section.

This module works on the index's rows (role, answered id, call ids), so finding a unit decodes no
message body; contextd.turns pairs decoded messages and does not expose which result answers which
call, hence this second walk of the same rule. ``tests/test_index.py`` checks that the two agree on
random turns with reused ids. Unanswered calls are the caller's to strip (``pair_tools`` on the
unit's messages), as the view's repair strips them: a call is never recalled without its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contextd.v1 import types_pb2

__all__ = ["answered_calls", "unit_members"]


class Row(Protocol):
    role: int
    tool_call_id: str  # the call a ROLE_TOOL_RESULT answers
    call_ids: tuple[str, ...]  # the calls the message makes, in block order


def answered_calls(turn: Sequence[Row]) -> dict[int, int]:
    """For one turn (conversation order): result index -> index of the message whose call it
    answers. A result missing from the answer answers no call (``pair_tools`` drops it)."""
    # Per call id, the messages of its unanswered calls, oldest first (a message making two calls
    # of one id is there twice); the same walk as pair_tools: a result, then the message's calls.
    open_calls: dict[str, list[int]] = {}
    answer: dict[int, int] = {}
    for i, row in enumerate(turn):
        if row.role == types_pb2.ROLE_TOOL_RESULT:
            waiting = open_calls.get(row.tool_call_id)
            if waiting:
                answer[i] = waiting.pop()
        for cid in row.call_ids:
            open_calls.setdefault(cid, []).append(i)
    return answer


def unit_members(turn: Sequence[Row], hit: int, answer: dict[int, int] | None = None) -> list[int] | None:
    """Indexes into `turn` of the unit of `turn[hit]`, in order: the message making the calls
    first, then the results answering them. None for a result that answers no call. `answer` is
    ``answered_calls(turn)`` when the caller has it already."""
    answer = answered_calls(turn) if answer is None else answer
    caller = hit
    if turn[hit].role == types_pb2.ROLE_TOOL_RESULT:
        found = answer.get(hit)
        if found is None:
            return None
        caller = found
    return [caller] + sorted(r for r, c in answer.items() if c == caller)
