#!/usr/bin/python3
"""contextd.Client and contextd.AsyncClient against a real contextd, one check per run
(test/python-client/live.test.ts). Each check is written once, as a coroutine, and runs against the
client KIND names (default Client) through clients/python/tests/client/client_kinds.py.

Usage: client_checks.py CHECK ADDRESS SESSION_ID [Client|AsyncClient]
  env CONTEXTD_RUNTIME_TOKEN   the runtime token (unset: no credentials)
  env CONTEXTD_TLS_CA, CONTEXTD_TLS_CERT, CONTEXTD_TLS_KEY   TLS / mTLS files (unset: plaintext)

Each check prints one JSON object (what the test asserts on) and exits 0; a failure the check did
not expect prints {"error": ...} (traceback on stderr) and exits 1. A check that expects an error
reports it as {"code": "INVALID_ARGUMENT", "method": ..., "message": ...} rather than failing.

Needs clients/python on PYTHONPATH (test/helpers/python.ts runPython puts it there).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import contextd
from contextd import ContextdError, Mode, PromptAuthority, Role
from contextd import messages as m

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "tests" / "client"))
from client_kinds import KINDS, collect, open_client  # noqa: E402

#: The client kind this run checks (argv[4]).
KIND = "Client"


def client(*args: Any, **kwargs: Any) -> Any:
    """Another client of the kind under test."""
    return open_client(KIND, *args, **kwargs)


async def refusal(call: Awaitable[object]) -> dict[str, str]:
    """The ContextdError awaiting `call` raises, as JSON; a call that succeeds is a failed check."""
    try:
        await call
    except ContextdError as err:
        return {
            "code": err.code.name, "method": err.method, "message": err.message, "text": str(err),
            "reason": err.reason, "metadata": err.metadata, "field_violations": [list(v) for v in err.field_violations],
        }
    raise AssertionError("the call succeeded; it was expected to fail")


def turn(n: int) -> list[contextd.Message]:
    call_id = f"call_{n}"
    return [
        m.user(f"Turn {n}: why does test_checkout_{n} fail?"),
        m.assistant("Let me run it.", tool_calls=[m.tool_call(call_id, "run_tests", {"only": f"test_checkout_{n}"})]),
        m.tool_result(call_id, "run_tests", f"FAILED test_checkout_{n}: assert 3 == 4", is_error=True),
        m.assistant(f"Fixed the off-by-one in checkout step {n}."),
    ]


async def append_assemble(cx: Any, session: str) -> dict[str, Any]:
    appended = await cx.append_messages(session=session, messages=[m.system("You are a careful coding agent."), *turn(1)])
    ctx = await cx.assemble(session=session, token_budget=32_000)
    info = (await cx.get_session(session=session)).info
    return {
        "entry_ids": len(appended.entry_ids),
        "mode": Mode.Name(ctx.mode),
        "prompt_authority": PromptAuthority.Name(ctx.prompt_authority),
        "engine_id": ctx.engine_id,
        "estimated_tokens": ctx.estimated_tokens,
        "roles": [Role.Name(x.role) for x in ctx.messages],
        "last_text": m.text_of(ctx.messages[-1]),
        "message_count": info.message_count,
    }


async def idempotent_retry(cx: Any, session: str) -> dict[str, Any]:
    messages = turn(1)
    first = await cx.append_messages(session=session, messages=messages, idempotency_key="turn-1")
    retry = await cx.append_messages(session=session, messages=messages, idempotency_key="turn-1")
    other = await refusal(cx.append_messages(session=session, messages=turn(2), idempotency_key="turn-1"))
    return {
        "first_replayed": first.replayed,
        "retry_replayed": retry.replayed,
        "same_ids": list(first.entry_ids) == list(retry.entry_ids),
        "entries": len(await collect(cx.transcript(session))),
        "other_messages": other,
    }


async def transcript_paging(cx: Any, session: str) -> dict[str, Any]:
    for n in range(6):
        await cx.append_messages(session=session, messages=turn(n))
    pages, token = 0, ""
    while True:
        page = await cx.get_transcript(session=session, page_size=5, page_token=token)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    entries = await collect(cx.transcript(session, page_size=5))
    seqs = [e.seq for e in entries]
    return {
        "entries": len(entries),
        "pages": pages,
        "increasing": all(a < b for a, b in zip(seqs, seqs[1:])),
        "first_text": m.text_of(entries[0].message),
    }


async def bad_request(cx: Any, session: str) -> dict[str, Any]:
    # One bad message in a batch: INVALID_ARGUMENT naming it, and nothing written.
    batch = [m.user("fine"), m.tool_result("", "run_tests", "no call id")]
    bad_batch = await refusal(cx.append_messages(session=session, messages=batch))
    nothing_written = await refusal(cx.get_session(session=session))
    await cx.append_messages(session=session, messages=[m.user("hello")])
    return {
        "bad_batch": bad_batch,
        "nothing_written": nothing_written,
        "no_budget": await refusal(cx.assemble(session=session, token_budget=0)),
        "no_session": await refusal(cx.assemble(session="", token_budget=100)),
    }


async def deadline(cx: Any, session: str) -> dict[str, Any]:
    # A large session assembled without compaction: the answer is ~1 MB, which no server can send
    # within gRPC's timer granularity (~1 ms), so a 1 µs deadline always ends the call first. (A small
    # Assemble on a warm connection once answered before the deadline was noticed.)
    text = " ".join(f"line {i} of the build log: compiling module_{i}.ts" for i in range(60))
    for batch in range(4):
        await cx.append_messages(session=session, messages=[m.user(f"{batch}/{k}: {text}") for k in range(100)])
    big = {"session": session, "token_budget": 1000, "auto_compact": False}
    per_call = await refusal(cx.assemble(**big, timeout=1e-6))
    async with client(cx.address, token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), tls=tls_config(), timeout=1e-6) as tight:
        default = await refusal(tight.assemble(**big))
        # A call's own timeout wins over the client's.
        generous = (await tight.get_session(session=session, timeout=30)).info.message_count
    return {"per_call": per_call, "client_default": default, "override_message_count": generous}


async def unauthenticated(cx: Any, session: str) -> dict[str, Any]:
    async with client(cx.address, tls=tls_config()) as anonymous, \
            client(cx.address, token="not-the-runtime-token", tls=tls_config()) as wrong:
        return {
            "no_token": await refusal(anonymous.append_messages(session=session, messages=[m.user("hi")])),
            "wrong_token": await refusal(wrong.assemble(session=session, token_budget=100)),
            "health_needs_no_token": await anonymous.health(),
            "with_token": len((await cx.append_messages(session=session, messages=[m.user("hi")])).entry_ids),
        }


async def tls(cx: Any, session: str) -> dict[str, Any]:
    await cx.append_messages(session=session, messages=[m.user("over TLS")])
    ctx = await cx.assemble(session=session, token_budget=1000)
    async with client(cx.address, token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), timeout=5) as plaintext:
        refused_plaintext = await refusal(plaintext.get_session(session=session))
    out: dict[str, Any] = {"mode": Mode.Name(ctx.mode), "health": await cx.health(), "plaintext": refused_plaintext}
    ca = tls_config()
    if ca is not None and ca.cert_file is not None:
        without_cert = contextd.TlsConfig(ca_file=ca.ca_file)
        async with client(cx.address, token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), tls=without_cert, timeout=5) as nocert:
            out["without_client_cert"] = await refusal(nocert.get_session(session=session))
    return out


async def search(cx: Any, session: str) -> dict[str, Any]:
    for n in range(8):
        await cx.append_messages(session=session, messages=turn(n))
    newest = await collect(cx.search(session, "test_checkout_3 fail", limit=10))
    # Every hit of a word most turns hold, two to a page: the pages followed to the end.
    paged = await collect(cx.search(session, "checkout", limit=1000, order=contextd.SearchOrder.SEARCH_ORDER_RELEVANCE))
    compacted = await cx.compact(session=session, token_budget=2_000, force=True)
    summary = next(e for e in await collect(cx.transcript(session)) if e.HasField("compaction"))
    covered = await cx.expand_compaction(session=session, compaction_entry_id=summary.id, page_size=100)
    # Compacted away, the turn is still found.
    after = [h.seq for h in await collect(cx.search(session, "test_checkout_0", limit=10))]
    return {
        "newest_seqs": [h.seq for h in newest],
        "snippet": newest[0].snippet if newest else "",
        "paged": len(paged),
        "paged_unique": len({h.entry_id for h in paged}),
        "compacted": compacted.compacted,
        "covered": len(covered.entries),
        "covered_first": m.text_of(covered.entries[0].message) if covered.entries else "",
        "found_after_compaction": after,
        "empty_query": await refusal(cx.search_transcript(session=session, query="  ")),
    }


CHECKS: dict[str, Callable[[Any, str], Awaitable[dict[str, Any]]]] = {
    f.__name__: f for f in (append_assemble, idempotent_retry, transcript_paging, bad_request, deadline, unauthenticated, tls, search)
}


def tls_config() -> contextd.TlsConfig | None:
    ca = os.environ.get("CONTEXTD_TLS_CA")
    if not ca:
        return None
    return contextd.TlsConfig(ca_file=ca, cert_file=os.environ.get("CONTEXTD_TLS_CERT"), key_file=os.environ.get("CONTEXTD_TLS_KEY"))


async def run(check: str, address: str, session: str) -> dict[str, Any]:
    async with client(address, token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), tls=tls_config(), timeout=30) as cx:
        return await CHECKS[check](cx, session)


def main(argv: list[str]) -> int:
    global KIND
    if len(argv) not in (4, 5) or argv[1] not in CHECKS or (len(argv) == 5 and argv[4] not in KINDS):
        print(json.dumps({"error": f"usage: client_checks.py {{{'|'.join(CHECKS)}}} ADDRESS SESSION_ID [{'|'.join(KINDS)}]"}))
        return 2
    KIND = argv[4] if len(argv) == 5 else "Client"
    try:
        result = asyncio.run(run(argv[1], argv[2], argv[3]))
    except Exception as e:  # noqa: BLE001 - anything unexpected fails the check, with its traceback
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
