#!/usr/bin/python3
"""A small engine built on contextd.engine, run as a REAL process by the SDK's tests (test_process.py
here, and test/python-engine-sdk/*.test.ts against a real contextd). What it does depends on the
session id of a call, so a test steers it without any control channel:

- "hang…":  waits until the call is cancelled or its deadline passes, logs "probe: call ended"
            (cause, time_remaining), then answers CANCELLED / DEADLINE_EXCEEDED;
- "fail…":  raises RuntimeError (the SDK answers INTERNAL; contextd quarantines the engine);
- "slow…":  answers after PROBE_SLOW_S seconds (default 1), for the drain on SIGTERM;
- "waiter…" (PROBE_ASYNC only): answers once PROBE_BURST (default 20) Assembles of "burst…"
            sessions have been answered while it waited — which only an engine serving calls
            concurrently can do (it logs "probe: waiter released");
- anything else: the newest messages that fit the budget, never starting with a tool result.

With PROBE_ASYNC=1 Assemble is an `async def` (the engine is then served on grpc.aio) that does the
same, awaiting instead of blocking; Compact stays the SDK's plain delegate_compaction_to_host.

Compact delegates to the host. Environment: the SDK's CONTEXTD_* variables, plus PROBE_ENGINE_ID
(default py-probe), PROBE_HEARTBEAT_S, PROBE_SLOW_S, PROBE_ASYNC, PROBE_BURST, and PROBE_BROKEN=1
to serve an invalid Engine.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

try:
    import contextd.engine  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from contextd.engine import CallContext, Engine, delegate_compaction_to_host, serve_engine  # noqa: E402
from contextd.v1 import engine_pb2, types_pb2  # noqa: E402


def assemble(req: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
    session = req.session.session_id
    if session.startswith("hang"):
        ctx.log.info("probe: waiting for the call to end", extra={"session": session})
        ctx.cancelled.wait(60)
        ctx.log.info("probe: call ended", extra={"session": session, "cause": ctx.cancel_cause, "time_remaining": ctx.time_remaining()})
        ctx.raise_if_cancelled()
    if session.startswith("fail"):
        raise RuntimeError("probe: told to fail")
    if session.startswith("slow"):
        ctx.log.info("probe: slow call started", extra={"session": session})
        if ctx.cancelled.wait(float(os.environ.get("PROBE_SLOW_S", "1"))):
            ctx.raise_if_cancelled()
    return newest_that_fit(req, ctx)


#: Assembles of "burst…" sessions answered, and the event a "waiter…" call awaits (PROBE_ASYNC).
bursts = 0
burst_done: asyncio.Event | None = None


async def assemble_async(req: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
    global bursts, burst_done
    session = req.session.session_id
    if burst_done is None:
        burst_done = asyncio.Event()  # on the engine's loop, where every call runs
    if session.startswith("hang"):
        ctx.log.info("probe: waiting for the call to end", extra={"session": session})
        try:
            await asyncio.Event().wait()  # never set: only the call's end stops it
        except asyncio.CancelledError:
            ctx.log.info("probe: call ended", extra={"session": session, "cause": ctx.cancel_cause, "time_remaining": ctx.time_remaining()})
            raise
    if session.startswith("fail"):
        raise RuntimeError("probe: told to fail")
    if session.startswith("slow"):
        ctx.log.info("probe: slow call started", extra={"session": session})
        await asyncio.sleep(float(os.environ.get("PROBE_SLOW_S", "1")))  # stands for awaiting a model
    if session.startswith("waiter"):
        ctx.log.info("probe: waiter waiting", extra={"session": session, "bursts": bursts})
        await burst_done.wait()
        ctx.log.info("probe: waiter released", extra={"session": session, "bursts": bursts})
    answer = newest_that_fit(req, ctx)
    if session.startswith("burst"):
        bursts += 1
        if bursts >= int(os.environ.get("PROBE_BURST", "20")):
            burst_done.set()
    return answer


def newest_that_fit(req: engine_pb2.ContextEngineServiceAssembleRequest, ctx: CallContext) -> dict:
    budget = req.token_budget if req.HasField("token_budget") else None
    kept: list[types_pb2.Message] = []
    tokens = 0
    for message in reversed(req.messages):
        if budget is not None and tokens + message.token_count > budget:
            break
        kept.insert(0, message)
        tokens += message.token_count
    while kept and kept[0].role == types_pb2.ROLE_TOOL_RESULT:  # never start with an orphaned result
        tokens -= kept.pop(0).token_count
    ctx.log.info("probe: assembled", extra={"session": req.session.session_id, "agent": req.session.agent_id, "kept": len(kept)})
    return {"messages": kept, "estimated_tokens": tokens, "prompt_authority": types_pb2.PROMPT_AUTHORITY_ASSEMBLED}


def main() -> None:
    engine_id = os.environ.get("PROBE_ENGINE_ID", "py-probe")
    if os.environ.get("PROBE_BROKEN") == "1":
        engine_id = "legacy"
    options = {}
    if os.environ.get("PROBE_HEARTBEAT_S"):
        options["heartbeat"] = float(os.environ["PROBE_HEARTBEAT_S"])
    serve_engine(
        Engine(
            id=engine_id,
            name="SDK probe",
            version="1.0.0",
            assemble=assemble_async if os.environ.get("PROBE_ASYNC") == "1" else assemble,
            compact=delegate_compaction_to_host,
        ),
        **options,
    )


if __name__ == "__main__":
    main()
