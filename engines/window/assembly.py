"""The window selection: which messages of the host's active view the model sees. Pure logic.

No gRPC and no I/O here; messages are contextd.v1 `Message` protobufs (anything with the same
attributes works: role, token_count, tool_call_id, metadata, content blocks with WhichOneof).

The rule (see README.md):

1. The pinned messages are kept first, in view order, and count in the budget: every system
   message (ROLE_SYSTEM, never summarized away: docs/PINNED-MESSAGES.md) and the host's compaction
   summary (metadata "contextd.kind" == "compaction_summary"). The same split as
   `contextd.pinned.split_pinned`; this module repeats it so that it imports nothing.
2. The rest is split into turns: a turn starts at a user message and runs up to the next one
   (messages before the first user message form a leading fragment, treated like a turn).
3. The newest turns are added whole, newest first, while they fit what the pinned messages leave
   of the budget. Selection stops at the first turn that does not fit, so the window is always a
   contiguous tail of the rest.
4. If the newest turn alone does not fit, the window is the latest user message plus the longest
   tail of that turn that fits and keeps every tool call with its result.
5. If not even the pinned messages plus the latest user message fit, the answer is exactly those,
   over the budget, flagged `overflow` (the engine answers PREASSEMBLY_MAY_OVERFLOW so the host
   compacts).

Token counts are the host's (`Message.token_count`); nothing is counted here.

Tool pairs: a tool result is kept only after the call it answers, and a call only with its result.
Pairs are matched within a turn (a runtime appends a call's result before the next user message).
A result whose call is not earlier in its turn is dropped, and a call that never got a result
(an aborted run) is removed from its assistant message, which is otherwise kept as it was (its
token_count still the stored one, so the estimate stays an upper bound). Well-formed transcripts
are returned untouched.
"""

from collections import namedtuple

# contextd.v1.Role wire values (proto/contextd/v1/types.proto).
ROLE_USER = 1
ROLE_ASSISTANT = 2
ROLE_TOOL_RESULT = 3
ROLE_SYSTEM = 4

SUMMARY_METADATA_KEY = "contextd.kind"
SUMMARY_METADATA_VALUE = "compaction_summary"

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


def tokens(message):
    return max(0, int(message.token_count or 0))


def total_tokens(messages):
    return sum(tokens(m) for m in messages)


def is_summary(message):
    try:
        return message.metadata.get(SUMMARY_METADATA_KEY) == SUMMARY_METADATA_VALUE
    except AttributeError:
        return False


def is_pinned(message):
    """A system message or the compaction summary: kept whatever the budget."""
    return message.role == ROLE_SYSTEM or is_summary(message)


def split_pinned(messages):
    """(pinned, rest), each in view order."""
    pinned, rest = [], []
    for m in messages:
        (pinned if is_pinned(m) else rest).append(m)
    return pinned, rest


def tool_call_ids(message):
    return [b.tool_call.id for b in message.content if b.WhichOneof("block") == "tool_call"]


def split_turns(messages):
    """Turns, oldest first: each starts at a user message (the first may be a leading fragment)."""
    turns = []
    for m in messages:
        if m.role == ROLE_USER or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def _without_calls(message, drop_ids):
    """A copy of `message` without the tool_call blocks in `drop_ids` (None when nothing is left)."""
    copy = type(message)()
    copy.CopyFrom(message)
    del copy.content[:]
    for b in message.content:
        if b.WhichOneof("block") == "tool_call" and b.tool_call.id in drop_ids:
            continue
        copy.content.add().CopyFrom(b)
    return copy if len(copy.content) > 0 else None


def pair_tools(turn):
    """The turn with every tool result after its call and every call answered (see the module doc).

    Returns the turn itself (the same list) when it is already well formed.
    """
    called = set()
    answered = set()
    orphan_results = set()
    for i, m in enumerate(turn):
        if m.role == ROLE_TOOL_RESULT:
            if m.tool_call_id in called:
                answered.add(m.tool_call_id)
            else:
                orphan_results.add(i)
        for cid in tool_call_ids(m):
            called.add(cid)
    dangling = called - answered
    if not orphan_results and not dangling:
        return turn
    out = []
    for i, m in enumerate(turn):
        if i in orphan_results:
            continue
        if dangling and any(cid in dangling for cid in tool_call_ids(m)):
            m = _without_calls(m, dangling)
            if m is None:
                continue
        out.append(m)
    return out


def longest_fitting_tail(body, budget):
    """The longest tail of `body` (a well-formed turn's messages after its user message) whose
    tokens fit `budget` and that cuts no tool pair: it never starts with, or contains, a tool
    result whose call lies before the cut. May be empty."""
    best = len(body)
    used = 0
    waiting = set()  # results in the tail whose call is not in it (yet)
    for start in range(len(body) - 1, -1, -1):
        m = body[start]
        used += tokens(m)
        if used > budget:
            break
        if m.role == ROLE_TOOL_RESULT:
            waiting.add(m.tool_call_id)
        for cid in tool_call_ids(m):
            waiting.discard(cid)
        if not waiting:
            best = start
    return body[best:]


def select_window(messages, budget=None, max_turns=0):
    """Chooses the window for `budget` tokens (None: no limit) and at most `max_turns` turns (0: no limit)."""
    view = list(messages)
    head, rest = split_pinned(view)
    summary_kept = any(is_summary(m) for m in head)
    base = total_tokens(head)
    limit = float("inf") if budget is None else budget

    def window(out, used, overflow, whole_turns, partial_turn):
        return Window(out, used, overflow, summary_kept, whole_turns, partial_turn, len(view) - len(out), len(head))

    turns = [pair_tools(t) for t in split_turns(rest)]
    if not turns:
        return window(head, base, base > limit, 0, False)

    newest = turns[-1]
    latest_user = [newest[0]] if newest[0].role == ROLE_USER else []
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
