import { readFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";
import { eventually, hostClient, refusal, registryClient } from "../helpers/registry-client.js";

const COMPACT_DEADLINE_MS = 600;

async function compactionEntries(cx: ContextdClient, sessionId: string) {
  const out = [];
  for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "compaction") out.push(e.entry.value);
  return out;
}

describe("compaction through a sidecar engine", () => {
  let contextd: ContextdProcess;
  let delegating: EngineProcess;
  let owning: EngineProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const messages = codingSession({ turns: 8, seed: 5 }).messages;

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        slots: { context_engine: "legacy", agents: { delegator: "py-delegating", owner: "py-owning" } },
        engines: {
          timeouts: { compact: `${COMPACT_DEADLINE_MS}ms` },
          health: { interval: "5s", timeout: "1s", unhealthy_threshold: 2 },
          quarantine: { base_ejection: "30s", max_ejection: "60s" },
        },
      },
    });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    registry = registryClient(contextd.address);
    delegating = await startPythonEngine({ engineId: "py-delegating", registry: contextd.address, owner: "team" });
    owning = await startPythonEngine({ engineId: "py-owning", registry: contextd.address, owner: "team", ownsCompaction: true });
    expect((await delegating.registered).ok).toBe(true);
    expect((await owning.registered).ok).toBe(true);
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await delegating?.stop().catch(() => undefined);
    await owning?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("an engine that does not own compaction delegates to the host; it lands once, naming the engine", async () => {
    const session = { sessionId: "delegated", agentId: "delegator" };
    await cx.appendMessages({ session, messages });
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(res).toMatchObject({ ok: true, compacted: true, engineId: "py-delegating", mode: Mode.MODE_NORMAL });
    const entries = await compactionEntries(cx, session.sessionId);
    expect(entries).toHaveLength(1);
    expect(entries[0].engineId).toBe("py-delegating");
    expect(entries[0].summary).toBe(res.result!.summary);
  });

  it("an owning engine's result is validated and committed by the host", async () => {
    const session = { sessionId: "owned", agentId: "owner" };
    await cx.appendMessages({ session, messages });
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(res).toMatchObject({ ok: true, compacted: true, engineId: "py-owning" });
    const entries = await compactionEntries(cx, session.sessionId);
    expect(entries.map((e) => [e.engineId, e.summary])).toEqual([["py-owning", "test summary"]]);
  });

  it("a compaction that hangs is answered within its deadline plus a margin, by legacy; the engine is quarantined for compact", async () => {
    const session = { sessionId: "hung", agentId: "delegator" };
    await cx.appendMessages({ session, messages });
    delegating.control({ compact: "hang" });
    const started = Date.now();
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(Date.now() - started).toBeLessThan(COMPACT_DEADLINE_MS + 1_000);
    expect(res).toMatchObject({ ok: true, compacted: true, engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toMatch(/deadline( of \d+ms)? exceeded/);
    const status_ = await registry.get("py-delegating");
    expect(status_.quarantine?.operation).toBe("compact");
    expect(status_.timeouts).toBeGreaterThanOrEqual(1);
    expect((await compactionEntries(cx, session.sessionId)).map((e) => e.engineId)).toEqual(["legacy"]);
  });

  it("a late result never lands: the engine answers after its deadline and the transcript is untouched by it", async () => {
    const session = { sessionId: "late", agentId: "owner" };
    await cx.appendMessages({ session, messages });
    owning.control({ compact: "ignore_cancel", ignore_cancel_ms: 1_500 });
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(res.engineId).toBe("legacy");
    // The engine has produced its answer, after the call had ended: whatever contextd does with it is done.
    await owning.waitForEvent((e) => e.event === "answered_late" && e.op === "compact", 10_000);
    const entries = await compactionEntries(cx, session.sessionId);
    expect(entries.map((e) => e.engineId)).toEqual(["legacy"]);
    expect(entries.some((e) => e.summary === "test summary")).toBe(false);
  });

  it("a contract-breaking compaction (unknown first_kept_entry_id) is refused and answered by legacy", async () => {
    await registry.clear("py-owning");
    const session = { sessionId: "garbage", agentId: "owner" };
    await cx.appendMessages({ session, messages });
    owning.control({ compact: "garbage" });
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain("first_kept_entry_id");
    expect((await compactionEntries(cx, session.sessionId)).map((e) => e.engineId)).toEqual(["legacy"]);
  });

  it("a host token reads only its own session, only while its call is in progress", async () => {
    await registry.clear("py-delegating");
    const dir = mkdtempSync(path.join(tmpdir(), "contextd-leak-"));
    const leak = path.join(dir, "host.json");
    delegating.control({ assemble: "slow", slow_ms: 1_500, leak_host_token_to: leak });
    const mine = { sessionId: "token-scope", agentId: "delegator" };
    await cx.appendMessages({ session: mine, messages });
    await cx.appendMessages({ session: { sessionId: "someone-else" }, messages: messages.slice(0, 4) });
    const inFlight = cx.assemble({ session: mine, tokenBudget: 16_000 });
    const leaked = await eventually(
      async () => {
        try {
          return JSON.parse(readFileSync(leak, "utf8")) as { token: string; expires_at_ms: number; session_id: string };
        } catch {
          return undefined;
        }
      },
      5_000,
      20,
    );
    expect(leaked.session_id).toBe("token-scope");
    const host = hostClient(contextd.address);
    try {
      const own = await host.readTranscript({ session: { sessionId: "token-scope" } }, leaked.token);
      expect(own.entries.length).toBeGreaterThan(0);
      const other = await refusal(host.readTranscript({ session: { sessionId: "someone-else" } }, leaked.token));
      expect(other.code).toBe(status.PERMISSION_DENIED);
      expect((await refusal(host.readTranscript({ session: { sessionId: "token-scope" } }, "made-up"))).code).toBe(status.UNAUTHENTICATED);
      expect((await inFlight).engineId).toBe("py-delegating");
      const ended = await refusal(host.readTranscript({ session: { sessionId: "token-scope" } }, leaked.token));
      expect(ended.code).toBe(status.UNAUTHENTICATED);
      expect(ended.details).toContain("ended");
    } finally {
      host.close();
    }
  });

  it("a hung call's token stops working at the call's deadline: the engine cannot commit late", async () => {
    await registry.clear("py-delegating");
    const dir = mkdtempSync(path.join(tmpdir(), "contextd-leak-"));
    const leak = path.join(dir, "host.json");
    delegating.control({ compact: "hang", leak_host_token_to: leak });
    const session = { sessionId: "late-delegation", agentId: "delegator" };
    await cx.appendMessages({ session, messages });
    const res = await cx.compact({ session, tokenBudget: 16_000, force: true });
    expect(res.engineId).toBe("legacy");
    const leaked = JSON.parse(readFileSync(leak, "utf8")) as { token: string };
    const host = hostClient(contextd.address);
    try {
      const late = await refusal(host.readTranscript({ session: { sessionId: "late-delegation" } }, leaked.token));
      expect(late.code).toBe(status.UNAUTHENTICATED);
    } finally {
      host.close();
    }
    expect((await compactionEntries(cx, session.sessionId)).map((e) => e.engineId)).toEqual(["legacy"]);
  });
});
