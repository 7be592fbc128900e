import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionInfo } from "../../src/contract/gen/contextd/v1/session.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd } from "../helpers/contextd-process.js";
import { closedPort, contextctl, int, tableRows } from "./run-contextctl.js";

/** contextctl, built (`npx tsc -p tsconfig.json`), run as a child process against a real contextd. */

/** A coding-agent conversation in the simple JSONL form: 1 system + 10 turns of 4 messages (41 messages). */
function conversation(): string {
  const lines: unknown[] = [{ role: "system", content: "You are a careful coding agent." }];
  for (let t = 0; t < 10; t++) {
    lines.push({ role: "user", content: `Turn ${t}: explain src/mod${t}.ts. ${"Some background on the task. ".repeat(30)}` });
    lines.push({ role: "assistant", content: "Let me read it.", tool_calls: [{ id: `call_${t}`, name: "read_file", arguments: { path: `src/mod${t}.ts` } }] });
    const source = Array.from({ length: 40 }, (_, i) => `export const v${i} = ${i * t}; // line ${i} of module ${t}`).join("\n");
    lines.push({ role: "tool", tool_call_id: `call_${t}`, name: "read_file", content: source });
    lines.push({ role: "assistant", content: `Module ${t} exports forty constants. ${"It is straightforward. ".repeat(25)}` });
  }
  return `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
}

describe("contextctl against a real contextd", () => {
  let server: Awaited<ReturnType<typeof startContextd>>;
  let cx: ContextdClient;
  let dir: string;
  const sessionId = "cli-replay";

  beforeAll(async () => {
    server = await startContextd();
    cx = new ContextdClient({ address: server.address });
    dir = mkdtempSync(join(tmpdir(), "contextctl-"));
    writeFileSync(join(dir, "conversation.jsonl"), conversation());
  });

  afterAll(async () => {
    cx?.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("health prints SERVING and exits 0", async () => {
    const run = await contextctl(server.address, "health");
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(`contextd ${server.address}: SERVING`);
  });

  it("health --json says SERVING", async () => {
    const run = await contextctl(server.address, "--json", "health");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ address: server.address, status: "SERVING", serving: true });
  });

  it("health against a closed port exits 3 (unreachable) with the error", async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const run = await contextctl(address, "--timeout", "3000", "health");
    expect(run.code).toBe(3);
    expect(run.stdout).not.toContain("SERVING");
    expect(run.stderr).toMatch(new RegExp(`contextd ${address}: (UNAVAILABLE|DEADLINE_EXCEEDED)`));
    const json = await contextctl(address, "--timeout", "3000", "--json", "health");
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      address,
      status: "UNREACHABLE",
      serving: false,
      error: expect.stringMatching(/^(UNAVAILABLE|DEADLINE_EXCEEDED): /),
    });
  });

  it("replay feeds the conversation turn by turn and stays within the budget", async () => {
    const run = await contextctl(server.address, "replay", join(dir, "conversation.jsonl"), "--budget", "4000", "--session", sessionId);
    expect(run.stderr).toBe(""); // no progress bar: stderr is not a TTY
    expect(run.code).toBe(0);
    const rows = tableRows(run.stdout);
    expect(rows).toHaveLength(10);
    rows.forEach((row, i) => {
      const [turn, messages, , assembled, , engine, mode] = row;
      expect(int(turn)).toBe(i + 1);
      expect(int(messages)).toBe(5 + 4 * i);
      expect(int(assembled)).toBeGreaterThan(0);
      expect(int(assembled)).toBeLessThanOrEqual(4000);
      expect(engine).toBe("legacy");
      expect(mode).toBe("NORMAL");
    });
    const appended = rows.map((r) => int(r[2]));
    expect(appended).toEqual([...appended].sort((a, b) => a - b));
    expect(appended.at(-1)).toBeGreaterThan(4000); // more than the budget went in ...
    expect(rows.some((r) => r[4].startsWith("yes"))).toBe(true); // ... so something was compacted
    expect(run.stdout).toMatch(
      new RegExp(
        `replayed 41 messages in 10 turns into session ${sessionId}: [\\d,]+ tokens appended, \\d+ compactions?, assembled at most [\\d,]+ of 4,000 tokens\\n$`,
      ),
    );
  });

  it("replay --json: one object per turn and a summary, matching the session the server holds", async () => {
    const run = await contextctl(
      server.address,
      "--json",
      "replay",
      join(dir, "conversation.jsonl"),
      "--budget",
      "4000",
      "--session",
      "cli-replay-json",
      "--batch",
    );
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const out = JSON.parse(run.stdout);
    expect(out).toMatchObject({ sessionId: "cli-replay-json", budget: 4000 });
    expect(out.turns).toHaveLength(10);
    expect(out.turns.map((t: { turn: number }) => t.turn)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    for (const t of out.turns) expect(t).toMatchObject({ engine: "legacy", mode: "NORMAL", compacted: expect.any(Boolean), kept: expect.any(Number) });
    const info = (await cx.getSession({ session: { sessionId: "cli-replay-json" } })).info!;
    expect(out.summary).toMatchObject({ messages: info.messageCount, turns: 10, tokensAppended: Number(info.totalTokens), compactions: info.compactionCount });
    expect(out.turns.at(-1).kept).toBe(info.activeTokens);
  });

  it("replay reports a bad line with its number", async () => {
    const file = join(dir, "bad.jsonl");
    writeFileSync(file, `${JSON.stringify({ role: "user", content: "hi" })}\n{oops\n`);
    const run = await contextctl(server.address, "replay", file, "--budget", "4000");
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${file}:2: invalid JSON`);
  });

  it("sessions lists the replayed session", async () => {
    const run = await contextctl(server.address, "sessions");
    expect(run.code).toBe(0);
    const row = tableRows(run.stdout).find((r) => r[0] === sessionId);
    expect(row).toBeDefined();
    expect(row![1]).toBe("-"); // no session key given
    expect(int(row![3])).toBe(41);
    expect(int(row![4])).toBeGreaterThan(0);
    expect(int(row![7])).toBeGreaterThan(0); // stored bytes
    expect(row![8]).toMatch(/^\d{4}-\d\d-\d\dT/);
    const json = JSON.parse((await contextctl(server.address, "--json", "sessions")).stdout);
    expect(json.sessions.map((s: { session: { sessionId: string } }) => s.session.sessionId)).toContain(sessionId);
  });

  it("session ID shows the counts and the context overview by section", async () => {
    const run = await contextctl(server.address, "session", sessionId);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/selected engine\s+legacy/);
    expect(run.stdout).toMatch(/messages\s+41/);
    // The context overview, then the agent's usage against its quotas.
    const all = tableRows(run.stdout);
    expect(all.map((r) => r[0])).toEqual(["summary", "messages", "tool results", "system addition", "total", "sessions", "stored bytes"]);
    const rows = all.slice(0, 5);
    const [summary, messages, tools, system, total] = rows.map((r) => int(r[1]));
    expect(summary + messages + tools + system).toBe(total);
    expect(summary).toBeGreaterThan(0); // the replay compacted
    expect(rows[4][2]).toBe("100.0%");
    const json = await contextctl(server.address, "--json", "session", sessionId);
    expect(json.code).toBe(0);
    const info = (await cx.getSession({ session: { sessionId } })).info!;
    expect(SessionInfo.fromJSON(JSON.parse(json.stdout))).toEqual(info);
    expect([summary, messages, tools, system, total]).toEqual([
      info.overview!.summaryTokens,
      info.overview!.messageTokens,
      info.overview!.toolResultTokens,
      info.overview!.systemAdditionTokens,
      info.overview!.totalTokens,
    ]);
  });

  it("session on an unknown id exits 1 with NOT_FOUND", async () => {
    const run = await contextctl(server.address, "session", "no-such-session");
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^contextctl: NOT_FOUND: /);
  });

  it("compact ID compacts through the selected engine", async () => {
    const run = await contextctl(server.address, "compact", sessionId, "--budget", "2000", "--force");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^engine\s+legacy$/m);
    expect(run.stdout).toMatch(/^mode\s+NORMAL$/m);
    expect(run.stdout).toMatch(/^compacted\s+(yes|no)$/m);
    expect(run.stdout).toMatch(/^reason\s+\S/m);
    const json = JSON.parse((await contextctl(server.address, "--json", "compact", sessionId)).stdout);
    expect(json).toMatchObject({ ok: true, engineId: "legacy" });
  });

  it("engines lists legacy owned by core", async () => {
    const run = await contextctl(server.address, "engines");
    expect(run.code).toBe(0);
    const legacy = tableRows(run.stdout).find((r) => r[0] === "legacy");
    expect(legacy?.slice(0, 5)).toEqual(["legacy", "core", "(in process)", "active", "SERVING"]);
    const json = JSON.parse((await contextctl(server.address, "--json", "engines")).stdout);
    expect(json.engines).toContainEqual(expect.objectContaining({ engineId: "legacy", owner: "core", builtin: true, health: "ENGINE_HEALTH_SERVING" }));
  });

  it("doctor checks the config, the store, the server and the registry", async () => {
    const run = await contextctl(server.address, "doctor", "--config", server.configPath);
    expect(run.code).toBe(0);
    expect(run.stdout.trim().split("\n")).toEqual([
      `✓ config: loads and validates (${server.configPath})`,
      expect.stringMatching(/^✓ store: opens \(sqlite:.*contextd\.db\)$/),
      `✓ server ${server.address}: SERVING`,
      expect.stringMatching(/^✓ ListEngines: .*legacy/),
    ]);
    const json = await contextctl(server.address, "--json", "doctor", "--config", server.configPath);
    expect(json.code).toBe(0);
    const out = JSON.parse(json.stdout);
    expect(out.ok).toBe(true);
    expect(out.checks.map((c: { name: string; ok: boolean }) => [c.name, c.ok])).toEqual([
      ["config", true],
      ["store", true],
      [`server ${server.address}`, true],
      ["ListEngines", true],
    ]);
  });

  it("doctor fails on a config file that does not exist", async () => {
    const run = await contextctl(server.address, "doctor", "--config", join(dir, "missing.yaml"));
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^✗ config: cannot read .*missing\.yaml/m);
    expect(JSON.parse((await contextctl(server.address, "--json", "doctor", "--config", join(dir, "missing.yaml"))).stdout)).toMatchObject({ ok: false });
    expect(run.stdout).toContain(`✓ server ${server.address}: SERVING`);
    expect(run.stdout).toMatch(/^✓ ListEngines: .*legacy/m);
  });
});

describe("contextctl against a contextd that requires auth", () => {
  let server: Awaited<ReturnType<typeof startContextd>>;

  beforeAll(async () => {
    const auth = { required: true, runtimes: [{ token_env: "CLI_TEST_RUNTIME_TOKEN", agents: ["*"] }] };
    server = await startContextd({ config: { auth }, env: { CLI_TEST_RUNTIME_TOKEN: "runtime-secret" } });
  });

  afterAll(async () => void (await server?.stop()));

  it("sends --token as a bearer token", async () => {
    const without = await contextctl(server.address, "sessions");
    expect(without.code).toBe(1);
    expect(without.stderr).toMatch(/^contextctl: UNAUTHENTICATED: /);
    const withToken = await contextctl(server.address, "--token", "runtime-secret", "sessions");
    expect(withToken).toMatchObject({ code: 0, stdout: "no sessions\n" });
  });
});
