import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession, moreTurns } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { contextText, toolPairViolations } from "../helpers/invariants.js";

const BUDGET = 32_000;

/** Appends in batches of `size`, as a runtime streaming a conversation would. */
async function appendInBatches(cx: ContextdClient, sessionId: string, messages: Message[], size: number): Promise<number> {
  let tokens = 0;
  for (let i = 0; i < messages.length; i += size) {
    const res = await cx.appendMessages({ session: { sessionId }, messages: messages.slice(i, i + size) });
    expect(res.entryIds).toHaveLength(Math.min(size, messages.length - i));
    tokens += res.tokenCounts.reduce((a, b) => a + b, 0);
  }
  return tokens;
}

function lastUser(messages: Message[]): Message {
  return [...messages].reverse().find((m) => m.role === Role.ROLE_USER)!;
}

describe("a long coding-agent session through a real contextd (legacy engine)", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const sessionId = "long-coding-session";
  const session = codingSession({ turns: 40, seed: 7 });

  beforeAll(async () => {
    contextd = await startContextd();
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("assembles within a 32k budget with tool pairs intact and the latest request verbatim", async () => {
    expect(session.messages.length).toBeGreaterThanOrEqual(150);
    const appendedTokens = await appendInBatches(cx, sessionId, session.messages, 17);
    expect(appendedTokens).toBeGreaterThanOrEqual(120_000);

    const res = await cx.assemble({ session: { sessionId }, tokenBudget: BUDGET });
    expect(res.engineId).toBe("legacy");
    expect(res.compaction).toBeDefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(res.messages.reduce((sum, m) => sum + m.tokenCount, 0)).toBe(res.estimatedTokens);
    expect(toolPairViolations(res.messages.slice(1))).toEqual([]);
    const latest = messageText(lastUser(session.messages));
    expect(contextText(res.messages)).toContain(latest);

    // Nothing is ever lost: the whole history pages back, compaction entry included.
    const entries = [];
    for await (const entry of cx.transcript(sessionId, 37)) entries.push(entry);
    const messages = entries.filter((e) => e.entry?.$case === "message");
    expect(messages).toHaveLength(session.messages.length);
    expect(messages.map((e) => (e.entry?.$case === "message" ? messageText(e.entry.value) : ""))).toEqual(session.messages.map(messageText));
    expect(entries.filter((e) => e.entry?.$case === "compaction")).toHaveLength(1);
  });

  it("keeps the facts planted in the first turns through a second compaction", async () => {
    const more = moreTurns(session.nextTurn, 25, 99);
    await appendInBatches(cx, sessionId, more, 25);
    const res = await cx.assemble({ session: { sessionId }, tokenBudget: BUDGET });
    expect(res.compaction).toBeDefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(toolPairViolations(res.messages.slice(1))).toEqual([]);
    expect(contextText(res.messages)).toContain(messageText(lastUser(more)));

    const info = (await cx.getSession({ session: { sessionId } })).info!;
    expect(info.compactionCount).toBeGreaterThanOrEqual(2);
    expect(info.messageCount).toBe(session.messages.length + more.length);
    expect(info.activeTokens).toBe(res.estimatedTokens);

    const text = contextText(res.messages);
    for (const [fact, value] of Object.entries(session.planted)) {
      expect(text, `planted ${fact} survives two compactions`).toContain(value);
    }
  });

  it("compacts on request (force) and reports the engine that served", async () => {
    const res = await cx.compact({ session: { sessionId }, tokenBudget: BUDGET, force: true });
    expect(res).toMatchObject({ ok: true, compacted: true, engineId: "legacy" });
    expect(res.result!.tokensAfter).toBeLessThanOrEqual(BUDGET);
    const again = await cx.assemble({ session: { sessionId }, tokenBudget: BUDGET, autoCompact: false });
    expect(again.estimatedTokens).toBe(res.result!.tokensAfter);
  });
});
