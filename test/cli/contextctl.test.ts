import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd } from "../helpers/contextd-process.js";

/** contextctl, built (`npm run build`), run as a child process against a real contextd. */
const BIN = resolve(import.meta.dirname, "../../bin/contextctl.js");

function contextctl(address: string, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  for (const key of ["CONTEXTD_ADDRESS", "CONTEXTD_RUNTIME_TOKEN", "CONTEXTD_CONFIG"]) delete env[key];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [BIN, "--address", address, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let [stdout, stderr] = ["", ""];
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return new Promise((r) => server.close(() => r(port)));
}

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

/** Cells of the data rows of a cli-table3 table (rows starting with │, header excluded). */
function tableRows(out: string): string[][] {
  const lines = out.split("\n").filter((l) => l.startsWith("│"));
  return lines.slice(1).map((l) => l.split("│").slice(1, -1).map((c) => c.trim()));
}

const int = (cell: string) => Number(cell.replace(/,/g, ""));

describe("contextctl against a real contextd", () => {
  let server: Awaited<ReturnType<typeof startContextd>>;
  let dir: string;
  const sessionId = "cli-replay";

  beforeAll(async () => {
    server = await startContextd();
    dir = mkdtempSync(join(tmpdir(), "contextctl-"));
    writeFileSync(join(dir, "conversation.jsonl"), conversation());
  });

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("health prints SERVING and exits 0", async () => {
    const run = await contextctl(server.address, "health");
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(`contextd ${server.address}: SERVING`);
  });

  it("health against a closed port exits 1 with the error", async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const run = await contextctl(address, "--timeout", "3000", "health");
    expect(run.code).toBe(1);
    expect(run.stdout).not.toContain("SERVING");
    expect(run.stderr).toMatch(new RegExp(`contextd ${address}: (UNAVAILABLE|DEADLINE_EXCEEDED)`));
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
    expect(run.stdout).toMatch(new RegExp(`replayed 41 messages in 10 turns into session ${sessionId}: [\\d,]+ tokens appended, \\d+ compactions?, assembled at most [\\d,]+ of 4,000 tokens\\n$`));
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
    expect(int(row![2])).toBe(41);
    expect(int(row![3])).toBeGreaterThan(0);
    expect(row![6]).toMatch(/^\d{4}-\d\d-\d\dT/);
    const json = JSON.parse((await contextctl(server.address, "--json", "sessions")).stdout);
    expect(json.sessions.map((s: { session: { sessionId: string } }) => s.session.sessionId)).toContain(sessionId);
  });

  it("session ID shows the counts and the context overview by section", async () => {
    const run = await contextctl(server.address, "session", sessionId);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/selected engine\s+legacy/);
    expect(run.stdout).toMatch(/messages\s+41/);
    const rows = tableRows(run.stdout);
    expect(rows.map((r) => r[0])).toEqual(["summary", "messages", "tool results", "system addition", "total"]);
    const [summary, messages, tools, system, total] = rows.map((r) => int(r[1]));
    expect(summary + messages + tools + system).toBe(total);
    expect(summary).toBeGreaterThan(0); // the replay compacted
    expect(rows[4][2]).toBe("100.0%");
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
    expect(legacy?.slice(0, 4)).toEqual(["legacy", "core", "(in process)", "SERVING"]);
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
  });

  it("doctor fails on a config file that does not exist", async () => {
    const run = await contextctl(server.address, "doctor", "--config", join(dir, "missing.yaml"));
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^✗ config: cannot read .*missing\.yaml/m);
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
