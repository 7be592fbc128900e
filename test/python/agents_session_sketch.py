"""Drives the OpenAI Agents SDK `Session` sketch of clients/python/README.md ("OpenAI Agents SDK for
Python: a `Session`") the way the SDK's Runner does — add_items after a turn, get_items before the
next — against a real contextd, without the SDK (it is not installable here): the protocol is plain
async methods over plain dicts. Prints one JSON line of what came back.

    python3 agents_session_sketch.py SKETCH_DIR ADDRESS SESSION_ID
"""
import asyncio
import json
import sys

sys.path.insert(0, sys.argv[1])
from agents_session import ContextdSession  # noqa: E402 - the README's block, written to SKETCH_DIR

import contextd  # noqa: E402

TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21C"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "It is sunny."}]},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "It is sunny in Paris.", "annotations": []}]},
]


async def main() -> None:
    address, session_id = sys.argv[2], sys.argv[3]
    async with contextd.AsyncClient(address) as cx:
        session = ContextdSession(cx, session_id)
        report = {"before": await session.get_items()}
        await session.add_items(TURN)
        report["after"] = await session.get_items()
        report["last_two"] = await session.get_items(2)
        small = ContextdSession(cx, session_id, token_budget=400)
        for n in range(8):
            await small.add_items([{"role": "user", "content": f"Turn {n}: " + "many words about the ledger " * 12},
                                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Noted {n}."}]}])
        report["compacted"] = await small.get_items()
        await session.clear_session()
        report["cleared"] = await session.get_items()
        print(json.dumps(report))


asyncio.run(main())
