/**
 * The `window` sample engine (engines/window, Python) end to end, all REAL processes: contextd with
 * auth on and the slot set to "window", the engine started as `/usr/bin/python3
 * engines/window/main.py` (on the Python engine SDK, contextd.engine) registering itself through the
 * SDK environment, and a runtime driving a long coding session through SessionService.
 */
import type { ServiceError } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode, Role, type Message, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage, messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession, moreTurns } from "../fixtures/coding-session.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess, type StartContextdOptions } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { contextText, toolPairViolations } from "../helpers/invariants.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { startWindowEngine, type WindowEngineProcess } from "./window-process.js";

const BUDGET = 32_000;
const OWNER_TOKEN = "t";
const RUNTIME_TOKEN = "r";

function contextdOptions(listen: string): StartContextdOptions {
  return {
    config: {
      listen,
      slots: { context_engine: "window" },
      auth: { required: true, owners: { team: { token_env: "TEAM_TOKEN", engines: ["window"] } }, runtimes: [{ token_env: "RT" }] },
    },
    env: { TEAM_TOKEN: OWNER_TOKEN, RT: RUNTIME_TOKEN },
  };
}

async function appendInBatches(cx: ContextdClient, sessionId: string, messages: Message[], size: number): Promise<number> {
  let tokens = 0;
  for (let i = 0; i < messages.length; i += size) {
    const res = await cx.appendMessages({ session: { sessionId }, messages: messages.slice(i, i + size) });
    tokens += res.tokenCounts.reduce((a, b) => a + b, 0);
  }
  return tokens;
}

function lastUser(messages: Message[]): Message {
  return [...messages].reverse().find((m) => m.role === Role.ROLE_USER && !isSummaryMessage(m))!;
}

async function transcript(cx: ContextdClient, sessionId: string): Promise<TranscriptEntry[]> {
  const out: TranscriptEntry[] = [];
  for await (const e of cx.transcript(sessionId, 500)) out.push(e);
  return out;
}

function compactions(entries: TranscriptEntry[]) {
  return entries.flatMap((e) => (e.entry?.$case === "compaction" ? [e.entry.value] : []));
}

const sum = (messages: Message[]) => messages.reduce((a, m) => a + m.tokenCount, 0);

describe("the window engine (Python) behind a real contextd", () => {
  let listen: string;
  let contextd: ContextdProcess;
  let engine: WindowEngineProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const long = codingSession({ turns: 40, seed: 7 });

  beforeAll(async () => {
    listen = `127.0.0.1:${await getFreePort()}`;
    contextd = await startContextd(contextdOptions(listen));
    engine = await startWindowEngine({ registry: listen, owner: "team", ownerToken: OWNER_TOKEN });
    registry = registryClient(listen);
    cx = new ContextdClient({ address: listen, token: RUNTIME_TOKEN, timeoutMs: 60_000 });
    await eventually(async () => (await registry.get("window", OWNER_TOKEN)).endpoint === engine.address, 30_000, 200);
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("registers itself with its real port and a valid EngineInfo", async () => {
    expect(engine.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(engine.address.endsWith(":0")).toBe(false);
    const status = await registry.get("window", OWNER_TOKEN);
    expect(status).toMatchObject({ engineId: "window", owner: "team", endpoint: engine.address });
    expect(status.info).toMatchObject({ id: "window", ownsCompaction: false, protocolVersions: [1], hostRequirements: ["host-compaction"] });
    expect(status.info!.name).not.toBe("");
    expect(status.info!.capabilities?.ingestBatch).toBe(true);
    const registered = await engine.waitForLog((l) => l.msg === "registered with the registry");
    expect(registered).toMatchObject({ level: "info", engine: "window", endpoint: engine.address });
  });

  it("without auto-compaction, answers the newest whole turns that fit (no summary yet)", async () => {
    const session = codingSession({ turns: 40, seed: 3 });
    const appended = await appendInBatches(cx, "raw-window", session.messages, 25);
    expect(appended).toBeGreaterThanOrEqual(120_000);

    const res = await cx.assemble({ session: { sessionId: "raw-window" }, tokenBudget: BUDGET, autoCompact: false });
    expect(res).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL, fallbackReason: "" });
    expect(res.compaction).toBeUndefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(toolPairViolations(res.messages)).toEqual([]);
    expect(res.messages[0]!.role).toBe(Role.ROLE_USER);
    expect(contextText(res.messages)).toContain(messageText(lastUser(session.messages)));
    // A window, not the whole view: the first turns (and their planted facts) are out of it.
    expect(res.messages.length).toBeLessThan(session.messages.length);
    expect(contextText(res.messages)).not.toContain(session.planted.ticket);
    // Whole turns: a contiguous tail of the transcript, starting at a user message.
    const entries = (await transcript(cx, "raw-window")).filter((e) => e.entry?.$case === "message");
    const tailIds = entries.slice(entries.length - res.messages.length).map((e) => e.id);
    expect(res.messages.map((m) => m.id)).toEqual(tailIds);
  });

  it("a long coding session at a 32k budget: the host compacts natively, window keeps its summary first", async () => {
    expect(long.messages.length).toBeGreaterThanOrEqual(150);
    const appended = await appendInBatches(cx, "long", long.messages, 17);
    expect(appended).toBeGreaterThanOrEqual(120_000);

    const res = await cx.assemble({ session: { sessionId: "long" }, tokenBudget: BUDGET });
    expect(res).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL });
    expect(res.compaction).toBeDefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(isSummaryMessage(res.messages[0]!)).toBe(true);
    expect(toolPairViolations(res.messages.slice(1))).toEqual([]);
    expect(contextText(res.messages)).toContain(messageText(lastUser(long.messages)));
    const text = contextText(res.messages);
    for (const [fact, value] of Object.entries(long.planted)) expect(text, `planted ${fact}`).toContain(value);

    // window does not own compaction: the host compacted natively before Assemble, as legacy.
    const entries = compactions(await transcript(cx, "long"));
    expect(entries).toHaveLength(1);
    expect(entries[0]!.engineId).toBe("legacy");
  });

  it("keeps the planted facts through more turns and a second compaction", async () => {
    const more = moreTurns(long.nextTurn, 25, 99);
    await appendInBatches(cx, "long", more, 25);
    const res = await cx.assemble({ session: { sessionId: "long" }, tokenBudget: BUDGET });
    expect(res).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL });
    expect(res.compaction).toBeDefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(isSummaryMessage(res.messages[0]!)).toBe(true);
    expect(toolPairViolations(res.messages.slice(1))).toEqual([]);
    const text = contextText(res.messages);
    expect(text).toContain(messageText(lastUser(more)));
    for (const [fact, value] of Object.entries(long.planted)) expect(text, `planted ${fact} survives two compactions`).toContain(value);
    expect(compactions(await transcript(cx, "long")).length).toBeGreaterThanOrEqual(2);
  });

  it("Compact through SessionService delegates to the host and lands under engine id window", async () => {
    const before = compactions(await transcript(cx, "long")).length;
    const logsBefore = engine.logLines().length;
    const res = await cx.compact({ session: { sessionId: "long" }, tokenBudget: BUDGET, force: true });
    expect(res).toMatchObject({ ok: true, compacted: true, engineId: "window", mode: Mode.MODE_NORMAL });
    expect(res.result!.summary).not.toBe("");
    expect(res.result!.tokensAfter).toBeLessThanOrEqual(BUDGET);

    const entries = compactions(await transcript(cx, "long"));
    expect(entries).toHaveLength(before + 1);
    const latest = entries[entries.length - 1]!;
    expect(latest.engineId).toBe("window");
    expect(latest.summary).toBe(res.result!.summary);
    expect(latest.firstKeptEntryId).toBe(res.result!.firstKeptEntryId);
    await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "delegated compaction answered" && l.compacted === true);

    // The next context starts with that summary; the planted facts are in it.
    const next = await cx.assemble({ session: { sessionId: "long" }, tokenBudget: BUDGET, autoCompact: false });
    expect(next).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL });
    expect(messageText(next.messages[0]!)).toContain(res.result!.summary);
    for (const value of Object.values(long.planted)) expect(contextText(next.messages)).toContain(value);
  });

  it("a budget below the active view: summary first, then the newest turns that fit", async () => {
    // A few more turns after the summary (the forced compaction kept only the pending request).
    const later = moreTurns(long.nextTurn + 25, 4, 99);
    await appendInBatches(cx, "long", later, 50);
    const info = (await cx.getSession({ session: { sessionId: "long" } })).info!;
    const summaryTokens = info.overview!.summaryTokens;
    expect(summaryTokens).toBeGreaterThan(0);
    const budget = summaryTokens + Math.floor((info.activeTokens - summaryTokens) / 2);
    expect(info.activeTokens).toBeGreaterThan(budget);
    const res = await cx.assemble({ session: { sessionId: "long" }, tokenBudget: budget, autoCompact: false });
    expect(res).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL });
    expect(res.estimatedTokens).toBeLessThanOrEqual(budget);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(isSummaryMessage(res.messages[0]!)).toBe(true);
    expect(res.messages[0]!.tokenCount).toBe(summaryTokens);
    expect(res.messages[1]!.role).toBe(Role.ROLE_USER);
    expect(toolPairViolations(res.messages.slice(1))).toEqual([]);
    expect(contextText(res.messages)).toContain(messageText(lastUser(later)));
    // Older turns after the summary were left out: after it, a contiguous tail of the transcript.
    const entries = (await transcript(cx, "long")).filter((e) => e.entry?.$case === "message");
    const kept = res.messages.slice(1);
    expect(kept.length).toBeLessThan(later.length + 1);
    expect(kept.map((m) => m.id)).toEqual(entries.slice(entries.length - kept.length).map((e) => e.id));
    const assembled = await engine.waitForLog((l) => l.msg === "assembled" && l.session === "long" && l.budget === budget);
    expect(assembled).toMatchObject({ summary: true, partial_turn: false, tokens: res.estimatedTokens });
    expect(assembled.whole_turns).toBeGreaterThanOrEqual(1);
  });

  it("registers again by itself when contextd comes back without its registration", async () => {
    const logsBefore = engine.logLines().length;
    await contextd.kill9();
    await contextd.cleanup();
    // A fresh data dir on the same address: the registry has never heard of the engine.
    contextd = await startContextd(contextdOptions(listen));
    await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "registered again with the registry", 30_000);
    await eventually(async () => (await registry.get("window", OWNER_TOKEN)).endpoint === engine.address, 15_000, 200);
    await cx.appendMessages({ session: { sessionId: "after-restart" }, messages: [user("hello again")] });
    const res = await cx.assemble({ session: { sessionId: "after-restart" }, tokenBudget: 4_000 });
    expect(res).toMatchObject({ engineId: "window", mode: Mode.MODE_NORMAL });
    expect(res.messages.map(messageText)).toEqual(["hello again"]);
  });

  it("SIGTERM: deregisters, stops gracefully and exits 0", async () => {
    const code = await engine.stop("SIGTERM");
    expect(code).toBe(0);
    const err = await registry.get("window", OWNER_TOKEN).then(
      () => undefined,
      (e: ServiceError) => e,
    );
    expect(err?.code).toBe(status.NOT_FOUND);
    const msgs = engine.logLines().map((l) => l.msg);
    expect(msgs).toEqual(expect.arrayContaining(["signal received: deregistering and draining", "deregistered from the registry", "engine stopped"]));
    expect(msgs.indexOf("deregistered from the registry")).toBeLessThan(msgs.indexOf("engine stopped"));
  });
});
