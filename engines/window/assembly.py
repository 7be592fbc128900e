"""The window selection: which messages of the host's active view the model sees. Pure logic.

No gRPC and no I/O here; messages are contextd.v1 `Message` protobufs. Turns, tool pairs and token
sums are `contextd.turns`'; the pinned split is `contextd.pinned`'s (the same rules as `recall`).

The rule (see README.md):

1. The pinned messages are kept first, in view order, and count in the budget: every system
   message (ROLE_SYSTEM, never summarized away: docs/pinned-messages.md) and the host's compaction
   summary (metadata "contextd.kind" == "compaction_summary"): `contextd.pinned.split_pinned`.
2. The rest is split into turns (`contextd.turns.split_turns`): a turn starts at a user message and
   runs up to the next one (messages before the first user message form a leading fragment,
   treated like a turn).
3. The newest turns are added whole, newest first, while they fit what the pinned messages leave
   of the budget. Selection stops at the first turn that does not fit, so the window is always a
   contiguous tail of the rest.
4. If the newest turn alone does not fit, the window is the latest user message plus the longest
   tail of that turn that fits and keeps every tool call with its result
   (`contextd.turns.longest_fitting_tail`).
5. If not even the pinned messages plus the latest user message fit, the answer is exactly those,
   over the budget, flagged `overflow` (the engine answers PREASSEMBLY_MAY_OVERFLOW so the host
   compacts).

Token counts are the host's (`Message.token_count`); nothing is counted here.

Tool pairs (`contextd.turns.paired_turns`): a tool result is kept only after the call it answers,
and a call only with its result, matched within a turn. A result whose call is not earlier in its
turn is dropped, and a call that never got a result (an aborted run) is removed from its assistant
message, which is otherwise kept as it was (its token_count still the stored one, so the estimate
stays an upper bound). Well-formed transcripts are returned untouched. A turn the repair leaves
empty (a leading fragment of only tool results whose calls were before the view) is left out; when
no turn is left, the answer is that of an empty history: the pinned messages alone.
"""

from collections import namedtuple
from collections.abc import Iterable

from contextd.messages import is_compaction_summary
from contextd.pinned import split_pinned
from contextd.turns import longest_fitting_tail, paired_turns, total_tokens
from contextd.v1 import types_pb2

Window = namedtuple(
    "Window",
    [
        "messages",  # what the model sees, oldest first
        "estimated_tokens",  # sum of their token_count
        "overflow",  # True: over the budget (pinned messages + latest user message alone do not fit)
        "summary_kept",  # the compaction summary is among the pinned head
        "whole_turns",  # turns kept whole
        "partial_turn",  # the newest turn was cut to a tail that fits
        "dropped",  # messages of the view left out
        "pinned",  # how many of `messages` are the pinned head (system messages and the summary)
    ],
)


def select_window(messages: Iterable[types_pb2.Message], budget: int | None = None, max_turns: int = 0) -> Window:
    """Chooses the window for `budget` tokens (None: no limit) and at most `max_turns` turns (0: no limit)."""
    view = list(messages)
    head, rest = split_pinned(view)
    summary_kept = any(is_compaction_summary(m) for m in head)
    base = total_tokens(head)
    limit = float("inf") if budget is None else budget

    def window(out, used, overflow, whole_turns, partial_turn):
        return Window(out, used, overflow, summary_kept, whole_turns, partial_turn, len(view) - len(out), len(head))

    turns = paired_turns(rest)  # without the turns the tool-pair repair leaves empty
    if not turns:
        return window(head, base, base > limit, 0, False)

    newest = turns[-1]
    latest_user = [newest[0]] if newest[0].role == types_pb2.ROLE_USER else []
    body = newest[len(latest_user):]
    required = base + total_tokens(latest_user)

    if required > limit:
        return window(head + latest_user, required, True, 0, bool(body))

    if base + total_tokens(newest) <= limit:
        chosen = [newest]
        used = base + total_tokens(newest)
        for turn in reversed(turns[:-1]):
            if max_turns and len(chosen) >= max_turns:
                break
            t = total_tokens(turn)
            if used + t > limit:
                break
            chosen.insert(0, turn)
            used += t
        return window(head + [m for turn in chosen for m in turn], used, False, len(chosen), False)

    tail = longest_fitting_tail(body, limit - required)
    return window(head + latest_user + tail, required + total_tokens(tail), False, 0, True)
