"""The recall engine on the SDK, served in process over real gRPC with a real index file: GetInfo,
Ingest/IngestBatch, Bootstrap and lazy gap fills from a HostService served in process (its
ReadTranscript), Assemble with and without a prompt, Compact delegated; main.py's environment.

    /usr/bin/python3 -m unittest discover -s engines/recall/tests -t engines/recall
"""

import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

from .helpers import ENGINE_DIR, TempIndex, assistant, entries, ids, result, summary, system, tool_call_ids, tool_pair_violations, turn, types_pb2, user

import grpc  # noqa: E402

from contextd.engine import serve_engine  # noqa: E402
from contextd.v1 import engine_pb2, engine_pb2_grpc, host_pb2, host_pb2_grpc  # noqa: E402
from recall_engine import RECALL_NOTE, RECALLED_FOR, recall_engine  # noqa: E402
from selection import UPCOMING  # noqa: E402

MAIN = os.path.join(ENGINE_DIR, "main.py")


def quiet_logger():
    logger = logging.getLogger("recall.tests")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


class FakeHost(host_pb2_grpc.HostServiceServicer):
    """A HostService holding one transcript per session (pages of 3, to exercise page tokens)."""

    def __init__(self):
        self.transcripts = {}  # session id -> [TranscriptEntry]
        self.reads = []  # (session id, active_only)
        self.compactions = []
        self.stalled = threading.Event()  # ReadTranscript of session "slow" waits for it

    def ReadTranscript(self, request, context):
        sid = request.session.session_id
        self.reads.append((sid, request.active_only))
        if sid == "slow":
            self.stalled.wait(30)
        all_entries = self.transcripts.get(sid)
        if all_entries is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such session")
        if request.active_only:
            return host_pb2.ReadTranscriptResponse(entries=all_entries[-4:])
        start = int(request.page_token or 0)
        page = all_entries[start : start + 3]
        more = start + 3 < len(all_entries)
        return host_pb2.ReadTranscriptResponse(entries=page, next_page_token=str(start + 3) if more else "")

    def DelegateCompaction(self, request, context):
        self.compactions.append((request, dict(context.invocation_metadata())))
        return host_pb2.DelegateCompactionResponse(
            ok=True, compacted=True, reason="compacted by the host", result=types_pb2.CompactionResult(summary="s", first_kept_entry_id="e7")
        )


class RecallOverGrpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FakeHost()
        cls.host_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        host_pb2_grpc.add_HostServiceServicer_to_server(cls.host, cls.host_server)
        cls.host_address = "127.0.0.1:%d" % cls.host_server.add_insecure_port("127.0.0.1:0")
        cls.host_server.start()
        cls.temp = TempIndex()
        # A block share large enough for the tests' small budgets.
        cls.running = serve_engine(recall_engine(cls.temp.index, block_share=0.3), block=False, registry="", handle_signals=False, logger=quiet_logger())
        cls.channel = grpc.insecure_channel(cls.running.address)
        cls.stub = engine_pb2_grpc.ContextEngineServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.running.stop()
        cls.temp.cleanup()
        cls.host_server.stop(0).wait()

    def host_context(self):
        return types_pb2.HostContext(endpoint=self.host_address, token="host-token", expires_at_ms=int((time.time() + 60) * 1000))

    @staticmethod
    def assembled(res):
        return [m.id for m in res.messages] + list(res.kept_entry_ids)

    def assemble(self, session, view, **fields):
        req = engine_pb2.ContextEngineServiceAssembleRequest(session=types_pb2.SessionRef(session_id=session), messages=view, host=self.host_context(), **fields)
        return self.stub.Assemble(req, timeout=10)

    def ingest(self, session, messages):
        req = engine_pb2.IngestBatchRequest(session=types_pb2.SessionRef(session_id=session), messages=messages, host=self.host_context())
        return self.stub.IngestBatch(req, timeout=10)

    def test_get_info(self):
        info = self.stub.GetInfo(engine_pb2.GetInfoRequest(), timeout=5).info
        self.assertEqual(info.id, "recall")
        self.assertFalse(info.owns_compaction)
        self.assertEqual(info.capabilities, engine_pb2.EngineCapabilities(ingest_batch=True, bootstrap=True, forget=True))
        self.assertEqual(list(info.host_requirements), ["host-compaction"])
        self.assertEqual(list(info.protocol_versions), [1])

    def test_recalls_a_message_from_before_the_cut(self):
        planted = user("note: the staging database password is quartz-walrus-17", 20)
        history = [planted] + turn(1) + turn(2) + turn(3) + turn(4)
        self.assertEqual(self.ingest("cut", history).ingested_count, len(history))
        s = summary(tokens=30)
        view = [s] + history[-8:]  # the host compacted turns 0..2 away
        res = self.assemble("cut", view, token_budget=200, prompt="What is the staging database password?")
        # A prompt that is not the latest user message's text is the message about to be sent: its
        # block goes after the newest turn, where that message will follow.
        self.assertEqual(self.assembled(res), ids(view) + [planted.id])
        # The echo form, the recalled message whole, marked as recalled.
        recalled = res.messages[-1]
        self.assertEqual(recalled.metadata.pop(RECALLED_FOR), UPCOMING)
        self.assertEqual(recalled, planted)
        self.assertEqual(res.system_prompt_addition, RECALL_NOTE)
        self.assertEqual(res.estimated_tokens, 30 + 20 + 80)
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_ASSEMBLED)

    def test_without_a_prompt_a_window_answered_by_id(self):
        history = turn(10, topic="walrus") + turn(11) + turn(12)
        self.ingest("window", history)
        res = self.assemble("window", history[4:], token_budget=85)
        self.assertEqual(list(res.kept_entry_ids), ids(history[4:]))
        self.assertEqual(len(res.messages), 0)
        # The same system prompt addition on every answer, recall or not: it heads the prompt.
        self.assertEqual(res.system_prompt_addition, RECALL_NOTE)
        # A prompt that matches nothing recalls nothing either.
        res = self.assemble("window", history[4:], token_budget=85, prompt="zebra")
        self.assertEqual((list(res.kept_entry_ids), res.system_prompt_addition), (ids(history[4:]), RECALL_NOTE))

    def test_tool_pairs_recalled_whole(self):
        history = turn(20, tool_calls=2, topic="start") + turn(21) + turn(22)
        history[2].content[0].text.text = "ledger reconciliation output"  # the first tool result
        self.ingest("tools", history)
        view = history[6:]
        res = self.assemble("tools", view, token_budget=200, prompt="ledger reconciliation")
        got = list(res.messages)
        self.assertEqual(tool_pair_violations(got), [])
        self.assertEqual(ids(got[-2:]), ids(history[1:3]))  # the call, then its result, after the newest turn
        self.assertLessEqual(res.estimated_tokens, 200)

    def test_an_aborted_call_is_recalled_without_it_not_with_a_later_calls_result(self):
        # Call x aborted in turn 1, then call x answered in turn 2 (the runtime reuses ids). The
        # index once paired the aborted call with turn 2's result; recall took that unit, the
        # budget left then took turn 2 whole, and the aborted call stood alone in the answer.
        aborted = assistant("walrus plan", 100, calls=["x"])
        second = [user("second"), assistant("go", calls=["x"]), result("x", 200, text="output"), assistant("done")]
        history = [user("start", 500), aborted] + second + turn(3) + turn(4)
        self.ingest("aborted", history)
        res = self.assemble("aborted", history, token_budget=450, prompt="walrus plan")
        # The view (920) does not fit: the older part steps out (the first two turns), and the
        # block recalls the aborted call's message from it, repaired (its call stripped).
        self.assertEqual(list(res.kept_entry_ids), [])
        got = list(res.messages)
        self.assertEqual(tool_pair_violations(got), [])
        self.assertEqual(ids(got), ids(history[-8:]) + [aborted.id])
        self.assertEqual((tool_call_ids(got[-1]), got[-1].content[0].text.text), ([], "walrus plan"))
        self.assertEqual(got[:-1], history[-8:])
        self.assertEqual((res.system_prompt_addition, res.estimated_tokens), (RECALL_NOTE, 80 + 100))

    def test_a_turns_block_is_chosen_once_and_stays_where_it_was(self):
        planted = user("the deploy key is kept in vault path kv/walrus-deploy", 20)
        history = [planted, assistant("noted")] + turn(70) + turn(71)
        ask = user("where is the walrus deploy key?", 10)
        self.ingest("stable", history + [ask])
        s = summary(tokens=30)
        view = [s] + history[2:] + [ask]  # the host cut the planted message away
        question = ask.content[0].text.text  # the host's default prompt: the latest user message's text
        first = self.assembled(self.assemble("stable", view, token_budget=300, prompt=question))
        self.assertEqual(first, [s.id] + ids(history[2:]) + [planted.id, ask.id])
        # The turn goes on and more matching messages arrive: the index's statistics drift, the
        # block does not; the answer only grows at its end.
        step = [assistant("searching for the walrus deploy key", 10, calls=["k1"]), result("k1", 10, "walrus deploy key: kv/walrus-deploy")]
        self.ingest("stable", step)
        view += step
        second = self.assembled(self.assemble("stable", view, token_budget=300, prompt=question))
        self.assertEqual(second, first + ids(step))
        # The next turn: the first turn's block stays where it was, the new one goes before the
        # new user message.
        nxt = user("and who rotates the walrus deploy key?", 10)
        self.ingest("stable", [nxt])
        view += [nxt]
        res = self.assemble("stable", view, token_budget=300, prompt=nxt.content[0].text.text)
        third = self.assembled(res)
        self.assertEqual(third[: len(second)], second)
        self.assertEqual(third[-1], nxt.id)
        self.assertEqual(res.system_prompt_addition, RECALL_NOTE)

    def test_a_block_for_the_message_about_to_be_sent_becomes_its_own(self):
        planted = user("the deploy key is kept in vault path kv/walrus-deploy", 20)
        history = [planted, assistant("noted")] + turn(72) + turn(73)
        self.ingest("upcoming", history)
        view = [summary(tokens=30)] + history[2:]
        question = "where is the walrus deploy key?"
        # The runtime assembles before appending its user message (OpenClaw does): the block goes
        # after the view, where that message will follow.
        first = self.assembled(self.assemble("upcoming", view, token_budget=300, prompt=question))
        self.assertEqual(first, ids(view) + [planted.id])
        ask = user(question, 10)
        self.ingest("upcoming", [ask])
        second = self.assembled(self.assemble("upcoming", view + [ask], token_budget=300, prompt=question))
        self.assertEqual(second, first + [ask.id])

    def test_compacts_ahead_through_the_host_when_the_next_block_would_not_fit(self):
        history = turn(80) + turn(81) + turn(82)  # 120 tokens
        self.ingest("ahead", history)
        before = len(self.host.compactions)
        self.assemble("ahead", history, token_budget=130)  # 10 left, less than a block's room (39)
        self.assertEqual(len(self.host.compactions), before + 1)
        req, metadata = self.host.compactions[-1]
        self.assertEqual((req.session.session_id, req.token_budget, req.force), ("ahead", 130, True))
        self.assertEqual(metadata.get("authorization"), "Bearer host-token")
        # With room to spare, or nothing before the newest turn to compact, the view is left alone.
        self.assemble("ahead", history, token_budget=1000)
        self.assemble("ahead", history[-4:], token_budget=45)
        self.assertEqual(len(self.host.compactions), before + 1)

    def test_bootstrap_imports_an_unknown_session_then_only_checks(self):
        history = [system()] + turn(30, topic="walrus") + turn(31)
        self.host.transcripts["boot"] = entries(history)
        req = engine_pb2.BootstrapRequest(session=types_pb2.SessionRef(session_id="boot"), host=self.host_context())
        res = self.stub.Bootstrap(req, timeout=10)
        self.assertEqual((res.bootstrapped, res.imported_messages), (True, len(history)))
        self.host.reads.clear()
        res = self.stub.Bootstrap(req, timeout=10)
        self.assertEqual((res.bootstrapped, res.imported_messages), (True, 0))
        self.assertEqual(self.host.reads, [("boot", True)])  # the active view only
        # Appends while the engine was away: the check finds them and reads everything.
        more = turn(32)
        self.host.transcripts["boot"] = entries(history + more)
        res = self.stub.Bootstrap(req, timeout=10)
        self.assertEqual(res.imported_messages, len(more))

    def test_a_view_with_unknown_entries_is_filled_from_the_transcript_on_assemble(self):
        history = turn(40, topic="walrus") + turn(41) + turn(42)
        self.host.transcripts["gaps"] = entries(history)
        self.host.reads.clear()
        view = history[4:]
        res = self.assemble("gaps", view, token_budget=100, prompt="walrus")
        self.assertEqual(self.host.reads[0], ("gaps", False))
        self.assertEqual(self.assembled(res)[-1], history[0].id)
        self.host.reads.clear()
        self.assemble("gaps", view, token_budget=100, prompt="walrus")
        self.assertEqual(self.host.reads, [])  # nothing missing any more

    def test_overflow(self):
        res = self.assemble("over", [summary(tokens=80), user("big walrus", 50)], token_budget=100, prompt="walrus")
        self.assertEqual(res.prompt_authority, types_pb2.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW)
        self.assertEqual(res.estimated_tokens, 130)

    def test_a_view_of_only_orphan_results_is_answered_with_the_pinned_messages(self):
        # Results whose calls were compacted away, and no user message: once an IndexError.
        history = turn(50, tool_calls=2, topic="walrus")
        self.ingest("orphans", history)
        sy = system(tokens=20)
        res = self.assemble("orphans", [sy, history[2], history[4]], token_budget=100, prompt="walrus")
        self.assertEqual(self.assembled(res), [sy.id])
        self.assertEqual((res.estimated_tokens, res.prompt_authority), (20, types_pb2.PROMPT_AUTHORITY_ASSEMBLED))

    def test_compact_delegates_to_the_host(self):
        req = engine_pb2.ContextEngineServiceCompactRequest(session=types_pb2.SessionRef(session_id="s1"), token_budget=32000, force=True, host=self.host_context())
        res = self.stub.Compact(req, timeout=10)
        self.assertEqual((res.ok, res.compacted, res.result.first_kept_entry_id), (True, True, "e7"))
        self.assertEqual(self.host.compactions[-1][1].get("authorization"), "Bearer host-token")

    def test_a_transcript_read_that_takes_too_long_leaves_a_window_within_the_deadline(self):
        history = turn(60, topic="walrus") + turn(61)
        self.host.transcripts["slow"] = entries(history)
        req = engine_pb2.ContextEngineServiceAssembleRequest(
            session=types_pb2.SessionRef(session_id="slow"), messages=history, token_budget=1000, prompt="walrus", host=self.host_context()
        )
        try:
            # The gap fill may spend half of the 3 s; then the answer is made without it.
            res = self.stub.Assemble(req, timeout=3)
        finally:
            self.host.stalled.set()
        self.assertEqual(list(res.kept_entry_ids), ids(history))
        self.assertEqual(res.system_prompt_addition, RECALL_NOTE)


class MainTest(unittest.TestCase):
    def run_main(self, **env):
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTD_", "RECALL_")) and k != "PYTHONPATH"}
        child_env.update(env)
        # From another directory and without PYTHONPATH, as contextd's managed sidecar runs it.
        return subprocess.run([sys.executable, MAIN], env=child_env, cwd="/", capture_output=True, text=True, timeout=30)

    def test_bad_settings_exit_2_with_one_line(self):
        done = self.run_main(RECALL_GRACE_MS="0")
        self.assertEqual((done.returncode, done.stderr), (2, "recall: RECALL_GRACE_MS must be >= 1, got 0\n"))
        done = self.run_main(RECALL_HEARTBEAT_MS="soon")
        self.assertEqual((done.returncode, done.stderr), (2, "recall: RECALL_HEARTBEAT_MS must be an integer, got 'soon'\n"))

    def test_an_index_that_cannot_be_opened_exits_2(self):
        with tempfile.NamedTemporaryFile() as f:
            done = self.run_main(RECALL_DB=os.path.join(f.name, "recall.db"))  # a file as the directory
        self.assertEqual(done.returncode, 2)
        self.assertTrue(done.stderr.startswith("recall: cannot open the index RECALL_DB="), done.stderr)
        self.assertEqual(done.stderr.count("\n"), 1)

    def test_bad_sdk_settings_exit_2_with_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            done = self.run_main(CONTEXTD_ENGINE_LISTEN="nowhere", RECALL_DB=os.path.join(d, "r.db"))
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr, "recall: listen address 'nowhere' is not host:port, [ipv6]:port or unix:/path\n")


if __name__ == "__main__":
    unittest.main()
