#!/usr/bin/python3
"""One event loop, one AsyncClient, calls in flight at once (test/python-engine-sdk/engine-sdk.test.ts).

Usage: async_burst.py ADDRESS AGENT   (env CONTEXTD_RUNTIME_TOKEN)

Sends an Assemble for session "waiter-1" (which the async probe engine holds until 20 Assembles of
"burst…" sessions have been answered), prints {"waiter": "sent"}, waits for a line on stdin (the
test sends it once the engine logs that the waiter is waiting), then sends the 20 bursts at once
from the same loop and prints one JSON line: who answered each and how long it took. Exits 1 with
{"error": ...} on anything unexpected.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback

from contextd import AsyncClient, Mode
from contextd import messages as m

BURST = 20


async def main(address: str, agent: str) -> dict[str, object]:
    async with AsyncClient(address, token=os.environ.get("CONTEXTD_RUNTIME_TOKEN"), timeout=30) as cx:
        sessions = ["waiter-1", *(f"burst-{i}" for i in range(BURST))]
        await asyncio.gather(*(cx.append_messages(session=(s, agent), messages=[m.user(f"hello from {s}")]) for s in sessions))
        started = time.monotonic()
        waiter = asyncio.ensure_future(cx.assemble(session=("waiter-1", agent), token_budget=4_000))
        print(json.dumps({"waiter": "sent"}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        bursts_started = time.monotonic()
        bursts = await asyncio.gather(*(cx.assemble(session=(f"burst-{i}", agent), token_budget=4_000) for i in range(BURST)))
        bursts_s = time.monotonic() - bursts_started
        answer = await waiter
        return {
            "waiter_engine": answer.engine_id,
            "waiter_mode": Mode.Name(answer.mode),
            "waiter_s": round(time.monotonic() - started, 3),
            "burst_engines": sorted({b.engine_id for b in bursts}),
            "burst_modes": sorted({Mode.Name(b.mode) for b in bursts}),
            "bursts_s": round(bursts_s, 3),
        }


if __name__ == "__main__":
    try:
        print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
    except Exception as e:  # noqa: BLE001 - anything unexpected fails the check, with its traceback
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
