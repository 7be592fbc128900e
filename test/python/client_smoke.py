#!/usr/bin/python3
"""Smoke test of contextd's SessionService from Python, through the `contextd` package.

Usage: client_smoke.py ADDRESS SESSION_ID
  env CONTEXTD_RUNTIME_TOKEN: the runtime token, when contextd requires one.

Appends ~60 realistic coding-agent messages (well over 8k tokens) to a new session, assembles with a
budget of 8000 (auto-compact on), forces a compaction to half of it, then reads the whole transcript back and
checks that every appended message is still there. Prints one JSON line with the results and exits 0,
or prints {"error": ...} (details on stderr) and exits 1.

Needs clients/python on PYTHONPATH (test/helpers/python.ts runPython puts it there).
"""

from __future__ import annotations

import json
import os
import random
import sys
import traceback
from typing import Any

import contextd
from contextd import messages as m

BUDGET = 8000
DEADLINE_S = 120
START_MS = 1_741_000_000_000


class CheckFailed(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


# --- realistic content ------------------------------------------------------------------------

NOUNS = ["order", "cart", "invoice", "shipment", "cursor", "session", "token", "batch", "webhook",
         "tenant", "quota", "report", "snapshot", "carrier", "label", "refund", "coupon", "lease"]
VERBS = ["load", "save", "fetch", "build", "parse", "validate", "normalize", "merge", "sync",
         "dispatch", "flush", "encode", "render", "schedule", "retry", "collect", "prune"]
PROPS = ["id", "tenantId", "createdAt", "status", "amount", "currency", "region", "cursor",
         "expiresAt", "attempts", "priority", "version", "etag", "ownerId", "quantity"]
AREAS = ["checkout", "search", "shipping", "inventory", "accounts", "webhooks", "exports"]


def camel(*parts):
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def fn_name(rng):
    return camel(rng.choice(VERBS), rng.choice(NOUNS) + rng.choice(["", "s"]))


def file_path(rng, area=None):
    return "src/%s/%s_%s.py" % (area or rng.choice(AREAS), rng.choice(NOUNS),
                                rng.choice(["service", "store", "handler", "client", "utils"]))


def code_file(rng, target_chars):
    lines = ["import logging", "from dataclasses import dataclass", "",
             "log = logging.getLogger(__name__)", ""]
    while sum(len(l) + 1 for l in lines) < target_chars:
        name = fn_name(rng)
        arg = rng.choice(NOUNS)
        lines.append("def %s(ctx, %s, limit=%d):" % (name, arg, rng.choice([10, 50, 100, 500])))
        lines.append('    """%s %s items for the %s %s."""' % (
            rng.choice(VERBS).capitalize(), rng.choice(NOUNS), rng.choice(["pending", "stale", "active"]), arg))
        for _ in range(rng.randint(4, 10)):
            p = rng.choice(PROPS)
            kind = rng.randint(0, 4)
            if kind == 0:
                lines.append("    %s = ctx.db.fetch_one('SELECT %s FROM %ss WHERE id = %%s', (%s.id,))" % (
                    rng.choice(NOUNS), p.lower(), rng.choice(NOUNS), arg))
            elif kind == 1:
                lines.append("    if %s.%s is None:" % (arg, p))
                lines.append("        raise ValueError('%s %%s has no %s' %% %s.id)" % (arg, p, arg))
            elif kind == 2:
                lines.append("    log.info('%s %s', extra={'%s': %s.%s, 'n': %d})" % (
                    rng.choice(VERBS), rng.choice(NOUNS), p, arg, p, rng.randint(1, 999)))
            elif kind == 3:
                lines.append("    for item in %s.%ss[:limit]:" % (arg, rng.choice(NOUNS)))
                lines.append("        item.%s = %s(ctx, item)" % (p, fn_name(rng)))
            else:
                lines.append("    # TODO(%s): %s the %s before %s" % (
                    rng.choice(["maria", "oleg", "wei", "priya"]), rng.choice(VERBS), rng.choice(NOUNS), rng.choice(VERBS)))
        lines.append("    return %s" % arg)
        lines.append("")
    return "\n".join("%5d  %s" % (i + 1, l) for i, l in enumerate(lines))


def test_log(rng, target_chars, fail):
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0", "collected %d items" % rng.randint(40, 400), ""]
    while sum(len(l) + 1 for l in lines) < target_chars:
        f = file_path(rng).replace("src/", "tests/test_")
        lines.append("%s %s" % (f, "".join(rng.choice("....F" if fail else ".....s") for _ in range(rng.randint(5, 40)))))
        if rng.random() < 0.3:
            lines.append("%s INFO %s: %s %s id=%s took %dms" % (
                "2025-03-03 10:%02d:%02d" % (rng.randint(0, 59), rng.randint(0, 59)), rng.choice(AREAS),
                rng.choice(VERBS), rng.choice(NOUNS), "%x" % rng.getrandbits(40), rng.randint(1, 900)))
    if fail:
        lines += ["", "=================================== FAILURES ===================================",
                  "___________________ test_%s_%s ___________________" % (rng.choice(VERBS), rng.choice(NOUNS)),
                  "E   AssertionError: assert %d == %d" % (rng.randint(100, 999), rng.randint(100, 999)),
                  "=========================== 1 failed, %d passed in %.2fs ===========================" % (
                      rng.randint(40, 400), rng.uniform(1, 30))]
    else:
        lines.append("============================ %d passed in %.2fs =============================" % (
            rng.randint(40, 400), rng.uniform(1, 30)))
    return "\n".join(lines)


def build_messages(rng, n_turns=15):
    """n_turns turns of [user, assistant(tool call), tool result, assistant] and a final user request."""
    msgs = []
    ts = START_MS

    def add(msg):
        nonlocal ts
        ts += 7000
        msg.timestamp_ms = ts
        msgs.append(msg)

    for turn in range(n_turns):
        area = rng.choice(AREAS)
        fn = fn_name(rng)
        path = file_path(rng, area)
        add(m.user("%s in %s breaks when the %s is empty (ticket %s-%d). Please find out why and fix it." % (
            fn, path, rng.choice(NOUNS), area.upper()[:4], rng.randint(1000, 9999))))
        call_id = "call_py_%02d_%08x" % (turn, rng.getrandbits(32))
        tool = rng.choice(["read_file", "run_tests"])
        args = {"path": path} if tool == "read_file" else {"command": "pytest tests/%s -q" % area}
        add(m.assistant("Let me look at %s first; the %s handling in %s looks suspicious." % (path, rng.choice(PROPS), fn),
                        tool_calls=[m.tool_call(call_id, tool, args)],
                        usage={"input": 1000 + 900 * turn, "output": rng.randint(50, 400), "total": 1100 + 900 * turn}))
        is_error = tool == "run_tests" and rng.random() < 0.3
        body = code_file(rng, rng.randint(2500, 4500)) if tool == "read_file" else test_log(rng, rng.randint(2500, 4500), is_error)
        add(m.tool_result(call_id, tool, body, is_error=is_error))
        add(m.assistant("Fixed: %s now checks `%s` before using it, and the %s path logs the %s. Tests for %s pass." % (
            fn, rng.choice(PROPS), rng.choice(NOUNS), rng.choice(PROPS), area)))
    add(m.user("Last one for today (smoke %08x): summarize what you changed in this session, file by file." % rng.getrandbits(32)))
    return msgs


# --- the smoke test ---------------------------------------------------------------------------

def run(cx: contextd.Client, session_id: str) -> dict[str, Any]:
    cx.wait_ready(timeout=20)
    session = (session_id, "python-smoke")
    messages = build_messages(random.Random(20250303))

    appended = cx.append_messages(session=session, messages=messages)
    check(len(appended.entry_ids) == len(messages),
          "AppendMessages returned %d entry ids for %d messages" % (len(appended.entry_ids), len(messages)))
    check(len(set(appended.entry_ids)) == len(messages) and all(appended.entry_ids), "entry ids must be unique and non-empty")
    check(len(appended.token_counts) == len(messages), "token_counts must have one count per message")
    appended_tokens = sum(appended.token_counts)
    check(appended_tokens > BUDGET, "appended only %d tokens; the smoke test needs more than %d" % (appended_tokens, BUDGET))

    assembled = cx.assemble(session=session, token_budget=BUDGET, auto_compact=True)
    check(assembled.estimated_tokens <= BUDGET, "Assemble estimated_tokens %d > budget %d" % (assembled.estimated_tokens, BUDGET))
    check(len(assembled.messages) > 0, "Assemble returned no messages")
    check(assembled.engine_id != "", "Assemble returned no engine_id")
    latest = m.text_of(messages[-1])
    check(any(m.text_of(x) == latest for x in assembled.messages), "the latest user message is not in the assembled context verbatim")

    # The auto-compaction already filled the budget with the newest messages; a forced compaction to
    # half of it must fold some of them into the summary.
    compacted = cx.compact(session=session, token_budget=BUDGET // 2, force=True,
                           compaction_target=contextd.CompactionTarget.COMPACTION_TARGET_BUDGET)
    check(compacted.ok, "Compact(force) answered ok=false: %s" % compacted.reason)

    entries = list(cx.transcript(session, page_size=25))
    seqs = [e.seq for e in entries]
    check(all(a < b for a, b in zip(seqs, seqs[1:])), "transcript seq is not strictly increasing")
    by_id = {e.id: e for e in entries if e.WhichOneof("entry") == "message"}
    for entry_id, original in zip(appended.entry_ids, messages):
        check(entry_id in by_id, "appended entry %s is missing from the transcript" % entry_id)
        stored = by_id[entry_id].message
        check(stored.role == original.role, "entry %s changed role" % entry_id)
        check(m.text_of(stored) == m.text_of(original), "entry %s changed content" % entry_id)
        check(stored.tool_call_id == original.tool_call_id and stored.is_error == original.is_error,
              "entry %s changed tool fields" % entry_id)

    return {
        "appended": len(appended.entry_ids),
        "appended_tokens": appended_tokens,
        "assembled_tokens": assembled.estimated_tokens,
        "assembled_messages": len(assembled.messages),
        "assemble_compacted": assembled.HasField("compaction"),
        "assemble_mode": contextd.Mode.Name(assembled.mode),
        "compacted": compacted.compacted,
        "compact_engine_id": compacted.engine_id,
        "transcript_messages": len(by_id),
        "transcript_entries": len(entries),
        "compactions": sum(1 for e in entries if e.WhichOneof("entry") == "compaction"),
        "engine_id": assembled.engine_id,
    }


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(json.dumps({"error": "usage: client_smoke.py ADDRESS SESSION_ID"}))
        return 2
    try:
        with contextd.Client(argv[1], token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), timeout=DEADLINE_S) as cx:
            result = run(cx, argv[2])
    except Exception as e:  # noqa: BLE001 - any failure (ContextdError, CheckFailed, ...) fails the smoke test
        traceback.print_exc()
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
