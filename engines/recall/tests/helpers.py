"""Message builders, a temp index and the tool-pair invariant, for the recall engine's unit tests.

Importing it puts the engine (engines/recall) and, unless `contextd` is importable already, the
repository's Python package (clients/python) on sys.path, as main.py does.
"""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_DIR = os.path.dirname(HERE)
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(ENGINE_DIR)), "clients", "python")
if ENGINE_DIR not in sys.path:
    sys.path.insert(0, ENGINE_DIR)
try:
    import contextd.engine  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, PACKAGE_DIR)

from contextd.v1 import types_pb2  # noqa: E402
from index import RecallIndex  # noqa: E402

_ids = [0]


def _next_id():
    _ids[0] += 1
    return "e%d" % _ids[0]


def text_block(text):
    return types_pb2.ContentBlock(text=types_pb2.TextBlock(text=text))


def user(text, tokens=10):
    return types_pb2.Message(id=_next_id(), role=types_pb2.ROLE_USER, content=[text_block(text)], token_count=tokens)


def assistant(text, tokens=10, calls=()):
    blocks = [text_block(text)] if text else []
    for cid in calls:
        blocks.append(types_pb2.ContentBlock(tool_call=types_pb2.ToolCallBlock(id=cid, name="read_file", arguments_json='{"path":"x"}')))
    return types_pb2.Message(id=_next_id(), role=types_pb2.ROLE_ASSISTANT, content=blocks, token_count=tokens)


def result(cid, tokens=10, text="ok"):
    return types_pb2.Message(
        id=_next_id(), role=types_pb2.ROLE_TOOL_RESULT, content=[text_block(text)], tool_call_id=cid, tool_name="read_file", token_count=tokens
    )


def system(text="You are a coding agent.", tokens=20):
    return types_pb2.Message(id=_next_id(), role=types_pb2.ROLE_SYSTEM, content=[text_block(text)], token_count=tokens)


def summary(text="summary of earlier turns", tokens=50):
    m = types_pb2.Message(id=_next_id(), role=types_pb2.ROLE_USER, content=[text_block(text)], token_count=tokens)
    m.metadata["contextd.kind"] = "compaction_summary"
    return m


def turn(n, tool_calls=1, tokens=10, result_tokens=10, parallel=False, topic=None):
    """user, then `tool_calls` call/result pairs (or one message with all calls when `parallel`), then a wrap-up."""
    about = topic or "request"
    out = [user("%s %d" % (about, n), tokens)]
    ids = ["t%d-c%d" % (n, i) for i in range(tool_calls)]
    if parallel and ids:
        out.append(assistant("calling %d tools" % len(ids), tokens, calls=ids))
        out.extend(result(cid, result_tokens) for cid in ids)
    else:
        for cid in ids:
            out.append(assistant("calling %s" % cid, tokens, calls=[cid]))
            out.append(result(cid, result_tokens))
    out.append(assistant("done with %d" % n, tokens))
    return out


def entries(messages, first_seq=1, hidden=()):
    """TranscriptEntries for `messages`, seq from `first_seq`."""
    return [
        types_pb2.TranscriptEntry(id=m.id, seq=first_seq + i, message=m, hidden=m.id in hidden)
        for i, m in enumerate(messages)
    ]


def tool_call_ids(m):
    return [b.tool_call.id for b in m.content if b.WhichOneof("block") == "tool_call"]


def tool_pair_violations(messages):
    """Every tool result answers a call before it in its turn, every call gets its result in its
    turn (test/helpers/invariants.ts, plus turns). Matched by position, since ids may repeat: a
    result answers the nearest earlier unanswered call of its id (contextd.turns' rule, written
    out again here as the tests' own oracle)."""
    problems = []
    open_calls = {}  # call id -> indexes of the messages of its unanswered calls in this turn

    def end_turn():
        for cid in sorted(open_calls):
            for i in open_calls[cid]:
                problems.append("messages[%d]'s tool call %s has no result in its turn" % (i, cid))
        open_calls.clear()

    for i, m in enumerate(messages):
        if m.role == types_pb2.ROLE_USER:
            end_turn()
        if m.role == types_pb2.ROLE_TOOL_RESULT:
            waiting = open_calls.get(m.tool_call_id)
            if waiting:
                waiting.pop()
            else:
                problems.append("messages[%d] answers %s, which no unanswered call before it in its turn makes" % (i, m.tool_call_id))
        for cid in tool_call_ids(m):
            open_calls.setdefault(cid, []).append(i)
    end_turn()
    return problems


def agentic_turn(rng, n, id_pool=("call_1", "call_2"), word="walrus"):
    """A random turn of an agent that reuses tool-call ids (from `id_pool`, shared by every turn):
    user, then steps of one or two calls whose results come at once, after the next step's call
    (nested: same ids pair by position), or never (aborted); sometimes a result that answers no
    call; then a wrap-up. Every message's text holds `word`, so one query finds them all."""
    size = lambda: rng.randint(1, 30)  # noqa: E731
    out = [user("%s request %d" % (word, n), size())]
    pending = []
    for step in range(rng.randint(0, 4)):
        calls = [rng.choice(id_pool) for _ in range(rng.choice([1, 1, 2]))]
        out.append(assistant("%s step %d.%d" % (word, n, step), size(), calls=calls))
        pending.extend(calls)
        if rng.random() < 0.1:
            out.append(result(rng.choice(id_pool), rng.randint(1, 200), "%s stray" % word))
        if rng.random() < 0.7:
            rng.shuffle(pending)
            out.extend(result(cid, rng.randint(1, 200), "%s output" % word) for cid in pending if rng.random() < 0.85)
            pending = []
    out.append(assistant("%s done with %d" % (word, n), size()))
    return out


def ids(messages):
    return [m.id for m in messages]


class TempIndex:
    """A RecallIndex in a fresh temp dir (a real SQLite file); `reopen()` is a restart."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="recall-test-")
        self.path = os.path.join(self.dir, "nested", "recall.db")
        self.index = RecallIndex(self.path)

    def reopen(self):
        self.index.close()
        self.index = RecallIndex(self.path)
        return self.index

    def cleanup(self):
        self.index.close()
        shutil.rmtree(self.dir, ignore_errors=True)
