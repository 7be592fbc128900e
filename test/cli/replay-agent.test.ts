import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delegateCompactionToHost, serveEngine, type RunningEngine } from "../../src/sdk/engine-sdk.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { contextctl, int, tableRows } from "./run-contextctl.js";

/**
 * `contextctl replay --agent ID` (the built CLI as a child process) against a real contextd whose
 * `slots.agents` routes the agent `Team-A` (added by `CONTEXTD_SLOTS__AGENTS='@merge ...'`, the env
 * override for keys a variable's name cannot spell) to a sidecar made here with the engine SDK: the replayed
 * session is created under that agent id, so that sidecar serves it; without `--agent` the global
 * slot (`legacy`) does.
 */
function conversation(turns: number): string {
  const lines: unknown[] = [];
  for (let t = 0; t < turns; t++) {
    lines.push({ role: "user", content: `Turn ${t}: ${"what does this module do? ".repeat(10)}` });
    lines.push({ role: "assistant", content: `Turn ${t}: ${"it exports constants. ".repeat(10)}` });
  }
  return `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
}

describe("contextctl replay --agent against a real contextd with a per-agent slot", () => {
  let server: ContextdProcess;
  let engine: RunningEngine;
  let cx: ContextdClient;
  let dir: string;
  let file: string;

  beforeAll(async () => {
    // `Team-A` cannot be spelled in a variable's name: the @merge value adds it to the file's map.
    server = await startContextd({ config: { slots: { agents: { coder: "legacy" } } }, env: { CONTEXTD_SLOTS__AGENTS: "@merge {Team-A: team-engine}" } });
    cx = new ContextdClient({ address: server.address });
    engine = await serveEngine(
      {
        info: { id: "team-engine", name: "passes the view through", version: "1.0.0" },
        assemble: (req) => ({ messages: req.messages }),
        compact: delegateCompactionToHost,
      },
      { registry: server.address, owner: "cli-test", handleSignals: false, logger: pino({ level: "silent" }) },
    );
    await engine.registered;
    dir = mkdtempSync(join(tmpdir(), "contextctl-replay-agent-"));
    file = join(dir, "conversation.jsonl");
    writeFileSync(file, conversation(3));
  });

  afterAll(async () => {
    cx?.close();
    await engine?.stop();
    await server?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the session is created under the agent id and served by the agent's engine; the totals say they are totals", async () => {
    const run = await contextctl(server.address, "replay", file, "--budget", "8000", "--session", "agent-replay", "--agent", "Team-A");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const header = run.stdout
      .split("\n")[1]
      .split("│")
      .slice(1, -1)
      .map((c) => c.trim());
    expect(header).toEqual(["turn", "messages so far", "tokens appended so far", "assembled", "compacted", "engine", "mode"]);
    const rows = tableRows(run.stdout);
    expect(rows.map((r) => [int(r[0]), int(r[1]), r[5], r[6]])).toEqual([
      [1, 2, "team-engine", "NORMAL"],
      [2, 4, "team-engine", "NORMAL"],
      [3, 6, "team-engine", "NORMAL"],
    ]);
    const appended = rows.map((r) => int(r[2]));
    expect(appended[0]).toBeGreaterThan(0);
    expect(appended[1]).toBeGreaterThan(appended[0]);
    expect(appended[2]).toBeGreaterThan(appended[1]);
    expect(run.stdout).toMatch(/replayed 6 messages in 3 turns into session agent-replay \(agent Team-A\): [\d,]+ tokens appended, 0 compactions, /);

    const info = (await cx.getSession({ session: { sessionId: "agent-replay" } })).info!;
    expect(info.session?.agentId).toBe("Team-A");
    expect(info.selectedEngineId).toBe("team-engine");
    expect(appended[2]).toBe(Number(info.totalTokens));
  });

  it("--json: agentId, the running totals under their new and their older names", async () => {
    const run = await contextctl(server.address, "--json", "replay", file, "--budget", "8000", "--session", "agent-replay-json", "--agent", "Team-A");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const out = JSON.parse(run.stdout);
    expect(out).toMatchObject({ sessionId: "agent-replay-json", agentId: "Team-A", budget: 8000 });
    expect(out.turns.map((t: Record<string, unknown>) => [t.messagesSoFar, t.messages, t.engine])).toEqual([
      [2, 2, "team-engine"],
      [4, 4, "team-engine"],
      [6, 6, "team-engine"],
    ]);
    for (const t of out.turns) expect(t.tokensAppendedSoFar).toBe(t.tokensAppended);
    const info = (await cx.getSession({ session: { sessionId: "agent-replay-json" } })).info!;
    expect(out.turns.at(-1).tokensAppendedSoFar).toBe(Number(info.totalTokens));
    expect(out.summary).toMatchObject({ messages: 6, turns: 3, tokensAppended: Number(info.totalTokens) });
  });

  it("without --agent the global slot serves the session; no agentId in --json", async () => {
    const run = await contextctl(server.address, "--json", "replay", file, "--budget", "8000", "--session", "no-agent-replay");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const out = JSON.parse(run.stdout);
    expect(out.agentId).toBeUndefined();
    expect(out.turns.map((t: { engine: string }) => t.engine)).toEqual(["legacy", "legacy", "legacy"]);
  });

  it("--agent on an existing session of another agent is refused before anything is appended", async () => {
    const before = (await cx.getSession({ session: { sessionId: "no-agent-replay" } })).info!;
    const run = await contextctl(server.address, "replay", file, "--budget", "8000", "--session", "no-agent-replay", "--agent", "Team-A");
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      'contextctl: session "no-agent-replay" exists under agent "", not "Team-A"; --agent applies to a new session (pass another --session)\n',
    );
    expect((await cx.getSession({ session: { sessionId: "no-agent-replay" } })).info!.messageCount).toBe(before.messageCount);
  });
});
