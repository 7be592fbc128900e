/**
 * The framework sketches of clients/python/README.md ("Agent frameworks: where contextd would plug
 * in"). LangGraph, the OpenAI Agents SDK for Python and ADK cannot be installed here, so what is
 * checked is what can be: every sketch is valid Python, and the Agents SDK `Session` sketch — plain
 * async methods over dicts and contextd's client, nothing of the SDK's — is run as written against
 * a real contextd the way the SDK's Runner calls it (test/python/agents_session_sketch.py).
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { PYTHON, lastJsonLine, requirePythonGrpc, runPython } from "../helpers/python.js";
import { readmeBlocks } from "../readme/readme-blocks.js";

const README = path.join(REPO_ROOT, "clients/python/README.md");
const SECTIONS = ["OpenAI Agents SDK for Python: a `Session`", "LangGraph: a node before the model", "Google ADK: model callbacks"];

let contextd: ContextdProcess;
let dir: string;

beforeAll(async () => {
  requirePythonGrpc();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-sketch-"));
  // A small kept tail, so that eight long turns under a budget of 400 make contextd compact.
  contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 40 } } });
});

afterAll(async () => {
  await contextd?.cleanup();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const sketch = (section: string): string => {
  const blocks = readmeBlocks(README, [section]).filter((b) => b.lang === "python");
  expect(blocks, section).toHaveLength(1);
  return blocks[0].text;
};

describe("the Python README's framework sketches", () => {
  it.each(SECTIONS)("%s: the sketch is valid Python", (section) => {
    const r = spawnSync(PYTHON, ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], { input: sketch(section), encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
  });

  it("the Agents SDK Session sketch keeps a turn's items in contextd and gives them back as they were added, the compaction summary as a user item", async () => {
    fs.writeFileSync(path.join(dir, "agents_session.py"), sketch(SECTIONS[0]));
    const run = await runPython("test/python/agents_session_sketch.py", [dir, contextd.address, "py-agents-sketch"]);
    expect(run.code, run.stderr + run.stdout).toBe(0);
    const r = lastJsonLine(run.stdout) as Record<string, Array<Record<string, unknown>>>;
    expect(r.before).toEqual([]);
    // Every item of the turn back exactly as added (ids, statuses, content parts), in order.
    expect(r.after).toEqual([
      { role: "user", content: "What is the weather in Paris?" },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "call_1", output: "sunny, 21C" },
      { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "It is sunny." }] },
      {
        type: "message",
        role: "assistant",
        id: "msg_1",
        status: "completed",
        content: [{ type: "output_text", text: "It is sunny in Paris.", annotations: [] }],
      },
    ]);
    expect(r.last_two).toEqual(r.after.slice(-2));
    // Past the budget contextd compacted: its summary opens the history, as a user item, and the first turns are gone from it.
    expect(r.compacted[0]).toMatchObject({ role: "user" });
    expect(JSON.stringify(r.compacted)).not.toContain("What is the weather in Paris?");
    expect(JSON.stringify(r.compacted)).toContain("Noted 7.");
    expect(r.cleared).toEqual([]);
  });
});
