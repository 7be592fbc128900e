/**
 * Pinned system messages (docs/pinned-messages.md) end to end, all real processes over real gRPC:
 * one contextd (SQLite), the lossless sidecar (node) and the window sidecar (Python), each serving
 * its own agent. A session opens with a system message and has another in the middle; it grows
 * through several compactions. Whatever engine serves it, both system messages reach the model
 * verbatim, first, in order, every time; no summary ever holds their text; the budget holds.
 *
 * Needs the compiled engines (`npm run build`) and Debian's /usr/bin/python3 with python3-grpcio.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AssembleResponse } from "../../src/contract/gen/contextd/v1/session.js";
import { Mode, Role, SubagentContextMode, type Message, type SessionRef } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startLossless, type LosslessProcess } from "../engines-lossless/lossless-process.js";
import { codingSession, moreTurns } from "../fixtures/coding-session.js";
import { system, textOf } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { toolPairViolations } from "../helpers/invariants.js";
import { PYTHON, pythonEnv, REPO_ROOT, requirePythonGrpc } from "../helpers/python.js";
import { eventually, registryClient } from "../helpers/registry-client.js";

const BUDGET = 12_000;
const START = "SYSTEM-START: you are the payments team's assistant. Never print a card number, never run migrations in production.";
const MIDDLE = "SYSTEM-MIDDLE: from this point on, answer in French and keep every answer under ten lines.";
const PINNED_TEXT = /SYSTEM-(START|MIDDLE)|never run migrations in production|answer in French/;

/** START, six turns, MIDDLE, six more turns and a pending request: about 40k tokens. */
function opening(seed: number): { messages: Message[]; nextTurn: number } {
  const cs = codingSession({ turns: 12, seed });
  const middle = cs.turnStarts[6];
  return { messages: [system(START), ...cs.messages.slice(0, middle), system(MIDDLE), ...cs.messages.slice(middle)], nextTurn: cs.nextTurn };
}

const sum = (messages: Message[]) => messages.reduce((n, m) => n + m.tokenCount, 0);

/**
 * `/usr/bin/python3 engines/window/main.py`, configured through the SDK environment. Readiness is
 * its registration, read from the registry (not a log line, whose wording is the engine's own).
 */
function spawnWindow(registry: string): { child: ChildProcess; output: () => string; stop: () => Promise<void> } {
  const env = pythonEnv({ CONTEXTD_REGISTRY: registry, CONTEXTD_OWNER: "team", CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0", WINDOW_PARENT_PID: String(process.pid) });
  for (const k of Object.keys(env))
    if (k.startsWith("CONTEXTD_") && !["CONTEXTD_REGISTRY", "CONTEXTD_OWNER", "CONTEXTD_ENGINE_LISTEN"].includes(k)) delete env[k];
  const child = spawn(PYTHON, ["engines/window/main.py"], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (output += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (output += c));
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  process.once("exit", () => child.kill("SIGKILL"));
  return {
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

describe("pinned system messages through a real contextd, legacy, lossless and window", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let lossless: LosslessProcess;
  let windowEngine: ReturnType<typeof spawnWindow>;
  let registry: ReturnType<typeof registryClient>;

  beforeAll(async () => {
    cd = await startContextd({
      config: {
        compaction: { reserve_tokens: 2_000, keep_recent_tokens: 8_000, summary_max_chars: 4_000 },
        slots: { agents: { "lossless-agent": "lossless", "window-agent": "window" } },
        engines: { timeouts: { assemble: "60s", compact: "60s" } },
      },
    });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 60_000 });
    registry = registryClient(cd.address);
    lossless = await startLossless({
      CONTEXTD_REGISTRY: cd.address,
      CONTEXTD_OWNER: "team",
      CONTEXTD_LOG_LEVEL: "info",
      LOSSLESS_DB: `${cd.dataDir}/lossless.db`,
      LOSSLESS_FRESH_TAIL_TOKENS: "3000",
      LOSSLESS_CHUNK_TOKENS: "3000",
    });
    requirePythonGrpc();
    windowEngine = spawnWindow(cd.address);
    for (const id of ["lossless", "window"]) {
      await eventually(
        async () => {
          if (windowEngine.child.exitCode !== null) throw new Error(`the window engine exited:\n${windowEngine.output()}`);
          const status = await registry.get(id).catch(() => undefined);
          return status && !status.quarantine ? status : undefined;
        },
        30_000,
        100,
      );
    }
  }, 90_000);

  afterAll(async () => {
    cx?.close();
    registry?.close();
    await lossless?.stop().catch(() => undefined);
    await windowEngine?.stop().catch(() => undefined);
    await cd?.cleanup();
  });

  const compactionEntries = async (session: SessionRef) => {
    const t = await cx.getTranscript({ session, pageSize: 1000 });
    return t.entries.flatMap((e) => (e.entry?.$case === "compaction" ? [e.entry.value] : []));
  };

  /** What every answer keeps: the two system messages verbatim first, the budget, the tool pairs. */
  const checkAnswer = (res: AssembleResponse, engineId: string) => {
    expect(res).toMatchObject({ engineId, mode: Mode.MODE_NORMAL });
    expect(res.messages.slice(0, 2).map((m) => [m.role, textOf(m)])).toEqual([
      [Role.ROLE_SYSTEM, START],
      [Role.ROLE_SYSTEM, MIDDLE],
    ]);
    const rest = res.messages.slice(2);
    expect(rest.some((m) => m.role === Role.ROLE_SYSTEM)).toBe(false);
    for (const m of rest) expect(textOf(m)).not.toMatch(PINNED_TEXT);
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(toolPairViolations(rest.filter((m) => !isSummaryMessage(m)))).toEqual([]);
    expect(res.messages.at(-1)!.role).toBe(Role.ROLE_USER);
  };

  /** Appends the opening, then 3 rounds of 4 more turns; `round` runs after each append. */
  async function grow(session: SessionRef, seed: number, round: (i: number) => Promise<void>) {
    const { messages, nextTurn } = opening(seed);
    await cx.appendMessages({ session, messages });
    await round(0);
    let next = nextTurn;
    for (let i = 1; i <= 3; i++) {
      await cx.appendMessages({ session, messages: moreTurns(next, 4, seed + i) });
      next += 4;
      await round(i);
    }
  }

  it("legacy: the host compacts natively four times; both system messages head the view each time, never summarized", async () => {
    const session: SessionRef = { sessionId: "pinned-legacy", sessionKey: "", agentId: "main" };
    let before = 0;
    await grow(session, 11, async () => {
      const res = await cx.assemble({ session, tokenBudget: BUDGET });
      checkAnswer(res, "legacy");
      // The view is [START, MIDDLE, summary, kept…]: the host's own layout, summary third.
      expect(isSummaryMessage(res.messages[2])).toBe(true);
      expect(res.compaction).toBeDefined();
      expect(res.compaction!.summary).not.toMatch(PINNED_TEXT);
      const entries = await compactionEntries(session);
      expect(entries.length).toBeGreaterThan(before);
      before = entries.length;
      // GetSession counts the pinned messages as message tokens of the view.
      const overview = (await cx.getSession({ session })).info!.overview!;
      expect(overview.summaryTokens + overview.messageTokens + overview.toolResultTokens).toBe(res.estimatedTokens);
      expect(overview.messageTokens).toBeGreaterThanOrEqual(res.messages[0].tokenCount + res.messages[1].tokenCount);
    });
    const entries = await compactionEntries(session);
    expect(entries.length).toBeGreaterThanOrEqual(4);
    for (const e of entries) {
      expect(e.engineId).toBe("legacy");
      expect(e.summary).not.toMatch(PINNED_TEXT);
    }
    // The transcript itself still holds each system message once, where it was appended.
    const t = await cx.getTranscript({ session, pageSize: 1000 });
    const systems = t.entries.filter((e) => e.entry?.$case === "message" && e.entry.value.role === Role.ROLE_SYSTEM);
    expect(systems.map((e) => (e.entry?.$case === "message" ? textOf(e.entry.value) : ""))).toEqual([START, MIDDLE]);
  });

  it("a FORK child of the compacted legacy session has the same pinned head: system messages, then the summary", async () => {
    const parent: SessionRef = { sessionId: "pinned-legacy", sessionKey: "", agentId: "main" };
    const child: SessionRef = { sessionId: "pinned-legacy-child", sessionKey: "", agentId: "main" };
    await cx.prepareSubagentSpawn({ parent, child, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK });
    const parentView = await cx.assemble({ session: parent, tokenBudget: 100_000, autoCompact: false });
    const childView = await cx.assemble({ session: child, tokenBudget: 100_000, autoCompact: false });
    expect(childView.messages.map((m) => [m.role, textOf(m)])).toEqual(parentView.messages.map((m) => [m.role, textOf(m)]));
    expect(childView.messages.slice(0, 2).map(textOf)).toEqual([START, MIDDLE]);
    expect(isSummaryMessage(childView.messages[2])).toBe(true);
  });

  it("lossless: its own summaries never fold a system message in; it assembles them first and commits host compactions without them", async () => {
    const session: SessionRef = { sessionId: "pinned-lossless", sessionKey: "", agentId: "lossless-agent" };
    let committed = 0;
    await grow(session, 21, async () => {
      const res = await cx.assemble({ session, tokenBudget: BUDGET });
      checkAnswer(res, "lossless");
      const compact = await cx.compact({ session, tokenBudget: BUDGET });
      expect(compact).toMatchObject({ engineId: "lossless", mode: Mode.MODE_NORMAL, ok: true });
      if (compact.compacted) {
        committed++;
        expect(compact.result!.summary).not.toMatch(PINNED_TEXT);
      }
    });
    expect(committed).toBeGreaterThanOrEqual(3);
    const entries = await compactionEntries(session);
    expect(entries.length).toBe(committed);
    for (const e of entries) expect(e.summary).not.toMatch(PINNED_TEXT);
  });

  it("window: the host compacts natively; window keeps both system messages and the summary first", async () => {
    const session: SessionRef = { sessionId: "pinned-window", sessionKey: "", agentId: "window-agent" };
    let before = 0;
    await grow(session, 31, async () => {
      const res = await cx.assemble({ session, tokenBudget: BUDGET });
      checkAnswer(res, "window");
      expect(isSummaryMessage(res.messages[2])).toBe(true);
      expect(res.messages[2].metadata["contextd.kind"]).toBe("compaction_summary");
      const entries = await compactionEntries(session);
      expect(entries.length).toBeGreaterThan(before);
      before = entries.length;
    });
    const entries = await compactionEntries(session);
    expect(entries.length).toBeGreaterThanOrEqual(4);
    for (const e of entries) expect(e.summary).not.toMatch(PINNED_TEXT);
  });
});
