/**
 * The plugin's engine (integrations/openclaw/src/engine.ts) called directly, as OpenClaw would, on
 * Node 20 against a real contextd: the lifecycle methods OpenClaw's agent runner does not reach in
 * the end-to-end tests (ingest, ingestBatch and afterTurn of its non-durable path, the subagent
 * hooks, maintain), the AgentMessages assemble returns, and how compact maps cancellation and
 * deadlines.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { Budgets } from "../../integrations/openclaw/src/budget.js";
import { createEngine, type EngineShared } from "../../integrations/openclaw/src/engine.js";
import { parseConfig, type PluginConfig } from "../../integrations/openclaw/src/config.js";
import { ServingLog } from "../../integrations/openclaw/src/serving-log.js";
import type { AgentMessage, ContextEngine } from "../../integrations/openclaw/src/openclaw-api.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const user = (text: string, timestamp: number): AgentMessage => ({ role: "user", content: text, timestamp });
const assistant = (text: string, timestamp: number): AgentMessage => ({
  role: "assistant",
  content: [{ type: "text", text, textSignature: `sig-${timestamp}` }],
  api: "openai-completions",
  provider: "fake",
  model: "fake-model",
  usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
  stopReason: "stop",
  timestamp,
});

describe("the OpenClaw plugin's engine against a real contextd", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let engine: ContextEngine;
  const warnings: string[] = [];
  const log = { info: () => {}, warn: (m: string) => warnings.push(m), error: (m: string) => warnings.push(m) };
  const shared = (config: PluginConfig): EngineShared => ({ budgets: new Budgets(config), serving: new ServingLog(log, config.address) });
  const engineOn = (client: ContextdClient, raw: Record<string, unknown>) => {
    const config = parseConfig(raw);
    return createEngine(client, config, log, shared(config));
  };

  beforeAll(async () => {
    contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 50 } } });
    cx = new ContextdClient({ address: contextd.address });
    engine = engineOn(cx, { address: contextd.address, defaultTokenBudget: 50_000 });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("declares what OpenClaw 2026.9.x requires before it hands over agent turns", () => {
    expect(engine.info).toMatchObject({
      id: "contextd",
      name: "contextd",
      ownsCompaction: true,
      transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" },
    });
    for (const m of [
      "bootstrap",
      "ingest",
      "ingestBatch",
      "commitTurn",
      "assemble",
      "compact",
      "afterTurn",
      "maintain",
      "prepareSubagentSpawn",
      "onSubagentEnded",
      "dispose",
    ] as const) {
      expect(typeof engine[m]).toBe("function");
    }
  });

  it("commitTurn is idempotent per advancement key; assemble returns the AgentMessages unchanged", async () => {
    const turn = [user("Hello", 1000), assistant("Hi there", 1001)];
    const p = { sessionId: "plug-1", sessionKey: "agent:main:plug-1", advancementKey: "turn-1", messages: turn };
    expect(await engine.commitTurn(p)).toEqual({ status: "committed" });
    expect(await engine.commitTurn(p)).toEqual({ status: "duplicate" });
    const assembled = await engine.assemble({ sessionId: "plug-1", sessionKey: "agent:main:plug-1", messages: turn, tokenBudget: 50_000 });
    expect(assembled.messages).toEqual(turn);
    expect(assembled.promptAuthority).toBe("assembled");
    expect(assembled.estimatedTokens).toBeGreaterThan(0);
    const info = (await cx.getSession({ session: { sessionId: "plug-1" } })).info!;
    expect(info).toMatchObject({ messageCount: 2, session: { agentId: "main", sessionKey: "agent:main:plug-1" } });
  });

  it("ingest, ingestBatch and afterTurn (OpenClaw's non-durable path) append once each", async () => {
    const s = { sessionId: "plug-2", sessionKey: "agent:main:plug-2" };
    const m1 = user("one", 2000);
    expect(await engine.ingest({ ...s, message: m1 })).toEqual({ ingested: true });
    await engine.ingest({ ...s, message: m1 });
    const batch = [assistant("two", 2001), user("three", 2002)];
    expect(await engine.ingestBatch({ ...s, messages: batch })).toEqual({ ingestedCount: 2 });
    await engine.ingestBatch({ ...s, messages: batch });
    const all = [m1, ...batch, assistant("four", 2003)];
    await engine.afterTurn({ ...s, sessionFile: "", messages: all, prePromptMessageCount: 3 });
    await engine.afterTurn({ ...s, sessionFile: "", messages: all, prePromptMessageCount: 3 });
    expect((await cx.getSession({ session: { sessionId: "plug-2" } })).info!.messageCount).toBe(4);
  });

  it("assemble never appends the copy of the history OpenClaw hands it (made for the model); without OpenClaw's transcript reader nothing is caught up", async () => {
    // Called outside OpenClaw, the plugin cannot read OpenClaw's stored transcript: the history
    // passed in (with tool call ids rewritten for the provider, in a real turn) must not be written.
    const s = { sessionId: "plug-3", sessionKey: "agent:main:plug-3" };
    const history = [user("before the plugin", 3000), assistant("reply", 3001)];
    const first = await engine.assemble({ ...s, messages: history, runtimeContext: undefined });
    expect(first.messages).toBe(history); // contextd has no such session: OpenClaw's own history
    await expect(cx.getSession({ session: { sessionId: "plug-3" } })).rejects.toMatchObject({ code: 5 });
  });

  it("when contextd is unreachable, assemble hands back OpenClaw's history (said once) and commitTurn throws for OpenClaw's outbox", async () => {
    const s = { sessionId: "plug-3b", sessionKey: "agent:main:plug-3b" };
    const history = [user("hello", 3000), assistant("reply", 3001)];
    const offline = engineOn(new ContextdClient({ address: "127.0.0.1:1", timeoutMs: 2_000 }), { address: "127.0.0.1:1" });
    const before = warnings.length;
    const fallback = await offline.assemble({ ...s, messages: history });
    expect(fallback.messages).toBe(history);
    expect(warnings.slice(before).join("\n")).toMatch(/contextd: assemble failed.*UNAVAILABLE/);
    // The same episode is not logged again on every call.
    const logged = warnings.length;
    await offline.assemble({ ...s, messages: history });
    expect(warnings.length).toBe(logged);
    await expect(offline.commitTurn({ ...s, advancementKey: "k", messages: history })).rejects.toMatchObject({ code: 14 });
  });

  it("compact goes to contextd's Compact; OpenClaw's abort signal cancels it", async () => {
    const s = { sessionId: "plug-4", sessionKey: "agent:main:plug-4" };
    const turns = Array.from({ length: 12 }, (_, i) => [
      user(`question ${i} ${"detail ".repeat(30)}`, 4000 + 2 * i),
      assistant(`answer ${i}`, 4001 + 2 * i),
    ]).flat();
    await engine.commitTurn({ ...s, advancementKey: "t", messages: turns });
    const res = await engine.compact({ ...s, tokenBudget: 20_000, force: true, compactionTarget: "threshold" });
    expect(res).toMatchObject({ ok: true, compacted: true, result: { summary: expect.stringContaining("question 0") } });
    expect(res.result).not.toHaveProperty("firstKeptEntryId");
    const aborted = new AbortController();
    aborted.abort();
    const cancelled = await engine.compact({ ...s, tokenBudget: 20_000, force: true, abortSignal: aborted.signal });
    expect(cancelled).toMatchObject({ ok: false, compacted: false, reason: expect.stringContaining("CANCELLED") });
    expect((await cx.getSession({ session: { sessionId: "plug-4" } })).info!.compactionCount).toBe(1);
  });

  it("subagent hooks: a forked child starts with the parent's view; rollback removes it; onSubagentEnded ends it", async () => {
    await engine.commitTurn({
      sessionId: "parent-1",
      sessionKey: "agent:main:parent-1",
      advancementKey: "p",
      messages: [user("parent", 5000), assistant("ok", 5001)],
    });
    const prepared = await engine.prepareSubagentSpawn({
      parentSessionKey: "agent:main:parent-1",
      parentSessionId: "parent-1",
      childSessionKey: "agent:main:child-1",
      childSessionId: "child-1",
      contextMode: "fork",
    });
    expect(prepared).toBeDefined();
    expect((await cx.getSession({ session: { sessionId: "child-1" } })).info!).toMatchObject({ messageCount: 2, parentSessionId: "parent-1" });
    await prepared!.rollback();
    await expect(cx.getSession({ session: { sessionId: "child-1" } })).rejects.toMatchObject({ code: 5 });

    const again = await engine.prepareSubagentSpawn({
      parentSessionKey: "agent:main:parent-1",
      parentSessionId: "parent-1",
      childSessionKey: "agent:main:child-2",
      childSessionId: "child-2",
      contextMode: "isolated",
    });
    expect(again).toBeDefined();
    await engine.onSubagentEnded({ childSessionKey: "agent:main:child-2", reason: "completed" });
    expect(SubagentEndReason.SUBAGENT_END_REASON_COMPLETED).toBeGreaterThan(0);
    expect((await cx.getSession({ session: { sessionId: "child-2" } })).info!.parentSessionId).toBe("parent-1");
  });

  it("maintain answers contextd's result, and bootstrap says when contextd already has the session", async () => {
    const res = await engine.maintain({ sessionId: "plug-1", sessionKey: "agent:main:plug-1" });
    expect(res).toMatchObject({ changed: false, bytesFreed: 0, rewrittenEntries: 0 });
    expect(await engine.bootstrap({ sessionId: "plug-1", sessionKey: "agent:main:plug-1" })).toMatchObject({
      bootstrapped: false,
      reason: "contextd already has this session",
    });
    await engine.dispose();
    // The shared channel survives dispose: OpenClaw disposes an engine after every turn.
    expect((await cx.getSession({ session: { sessionId: "plug-1" } })).info!.messageCount).toBe(2);
  });
});
