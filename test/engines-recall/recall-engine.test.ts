/**
 * The `recall` sample engine (engines/recall, Python) end to end, all REAL processes: contextd with
 * the slot set to "recall" and the engine as a managed sidecar (`/usr/bin/python3
 * engines/recall/main.py`, RECALL_DB a temp file), a runtime appending a long coding session with
 * a fact planted at its start, compacting it so that the fact is behind the cut, then asking about
 * it: the planted message comes back from the engine's own index. Then the same after contextd and
 * the engine restart on the same data dir and index file. And what the layout is for, a provider's
 * prompt cache: an agent loop's consecutive answers are append-only, under the same system prompt
 * addition.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactionTarget, Mode, Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage, messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess, type StartContextdOptions } from "../helpers/contextd-process.js";
import { requirePythonGrpc, PYTHON } from "../helpers/python.js";
import { contextText, toolPairViolations } from "../helpers/invariants.js";

const BUDGET = 32_000;
const SESSION = "recall-long";
const FACT = "the staging database password is quartz-walrus-17";
const QUESTION = "What was the staging database password again?";

const sum = (messages: Message[]) => messages.reduce((a, m) => a + m.tokenCount, 0);
/** The metadata key the engine marks a recalled message with: the user message it was recalled for ("upcoming": the one about to be sent). */
const RECALLED_FOR = "recall.recalled_for";
const recalled = (m: Message) => m.metadata[RECALLED_FOR] !== undefined;
/** The engine's system prompt addition: the same on every answer. */
const NOTE = /^Some earlier messages of this conversation may be shown again as recalled context/;
/** A message as a provider sees it (what its prompt cache compares). */
const providerView = (m: Message) => JSON.stringify([m.role, m.content, m.toolCallId, m.toolName, m.isError]);

function options(db: string): StartContextdOptions {
  return {
    config: {
      log_level: "debug",
      slots: { context_engine: "recall" },
      engines: {
        managed: [{ id: "recall", command: [PYTHON, "engines/recall/main.py"], env: { RECALL_DB: db, RECALL_LOG_LEVEL: "debug" } }],
      },
    },
  };
}

/** Resolves once the managed sidecar has registered (its log lines are folded into contextd's). */
async function registered(cd: ContextdProcess): Promise<void> {
  await cd.waitForLog((l) => l.sidecar === "recall" && l.msg === "registered with the registry", 60_000);
}

async function appendInBatches(cx: ContextdClient, messages: Message[], size: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < messages.length; i += size) {
    ids.push(...(await cx.appendMessages({ session: { sessionId: SESSION }, messages: messages.slice(i, i + size) })).entryIds);
  }
  return ids;
}

describe("the recall engine (Python) behind a real contextd", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let dir: string;
  let db: string;
  let plantedId: string;
  const session = codingSession({ turns: 30, seed: 21 });
  const lastUser = session.messages[session.messages.length - 1]!;

  beforeAll(async () => {
    requirePythonGrpc();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "recall-engine-"));
    db = path.join(dir, "index", "recall.db");
    contextd = await startContextd(options(db));
    await registered(contextd);
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
  }, 90_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("indexes the appends, and a compaction delegated to the host puts the planted fact behind the cut", async () => {
    const planted = [user(`Before we start, for the record: ${FACT}. Keep it in mind.`), assistant("Noted, I will keep that in mind.")];
    const ids = await appendInBatches(cx, [...planted, ...session.messages], 20);
    plantedId = ids[0]!;
    expect(fs.existsSync(db)).toBe(true);

    const compacted = await cx.compact({
      session: { sessionId: SESSION },
      tokenBudget: 8_000,
      force: true,
      compactionTarget: CompactionTarget.COMPACTION_TARGET_BUDGET,
    });
    expect(compacted).toMatchObject({ ok: true, compacted: true, engineId: "recall" });

    // Without a prompt ("": an unset one is the latest user message's text, the host's default):
    // a window over the view, and the planted message is not in it.
    const plain = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET, prompt: "" });
    expect(plain).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL });
    expect(plain.systemPromptAddition).toMatch(NOTE);
    expect(plain.messages.map((m) => m.id)).not.toContain(plantedId);
    expect(plain.messages.filter(recalled)).toEqual([]);
    expect(isSummaryMessage(plain.messages[0]!)).toBe(true);
    expect(plain.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(toolPairViolations(plain.messages)).toEqual([]);
    expect(contextText(plain.messages)).toContain(messageText(lastUser));
  });

  it("a prompt about the planted fact (the message about to be sent) recalls its message from before the cut after the view, marked, within budget, tool pairs intact", async () => {
    const res = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET, prompt: QUESTION });
    expect(res).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL, fallbackReason: "" });
    const at = res.messages.findIndex((m) => m.id === plantedId);
    expect(at, "the planted message is in the context").toBeGreaterThan(0);
    expect(messageText(res.messages[at]!)).toContain(FACT);
    expect(res.messages[at]!.metadata[RECALLED_FOR]).toBe("upcoming");
    expect(res.systemPromptAddition).toMatch(NOTE);
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    // The host counted the recalled messages itself: the same counts they were stored with.
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(toolPairViolations(res.messages.filter((m) => !recalled(m)))).toEqual([]);
    expect(toolPairViolations(res.messages.filter(recalled))).toEqual([]);
    // Pinned summary first, then the view, then the block: the question is not in the view yet,
    // and the runtime sends it right after the block.
    expect(isSummaryMessage(res.messages[0]!)).toBe(true);
    const view = res.messages.filter((m) => !recalled(m));
    expect(messageText(view[view.length - 1]!)).toBe(messageText(lastUser));
    expect(res.messages.slice(0, view.length)).toEqual(view);
    // Recall adds to the view: more than the plain window.
    const plain = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET, prompt: "" });
    expect(res.estimatedTokens).toBeGreaterThan(plain.estimatedTokens);
    expect(res.messages.length).toBeGreaterThan(plain.messages.length);
  });

  it("an unset prompt is the latest user message's text (the host's default): its block sits just before that message, and the same request gets the same answer", async () => {
    const res = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET });
    expect(res).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL });
    expect(res.systemPromptAddition).toMatch(NOTE);
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    const block = res.messages.filter(recalled);
    expect(block.length).toBeGreaterThan(0);
    // At most the block's share of the budget (5 %).
    expect(sum(block)).toBeLessThanOrEqual(BUDGET * 0.05);
    const last = res.messages[res.messages.length - 1]!;
    expect(messageText(last)).toBe(messageText(lastUser));
    expect(res.messages.slice(-1 - block.length, -1)).toEqual(block);
    expect(block.every((m) => m.metadata[RECALLED_FOR] === last.id)).toBe(true);
    expect(toolPairViolations(res.messages.filter((m) => !recalled(m)))).toEqual([]);
    expect(toolPairViolations(block)).toEqual([]);
    const again = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET });
    expect(again.messages.map(providerView)).toEqual(res.messages.map(providerView));
  });

  it("after contextd and the engine restart on the same data dir and index, recall still works from the file", async () => {
    cx.close();
    contextd = await contextd.restart();
    await registered(contextd);
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
    const res = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET, prompt: QUESTION });
    expect(res).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL });
    expect(res.messages.map((m) => m.id)).toContain(plantedId);
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(toolPairViolations(res.messages)).toEqual([]);
    // The restarted engine's Bootstrap found the session in its file: no transcript import.
    await contextd.waitForLog((l) => l.sidecar === "recall" && l.msg === "session already indexed" && l.session === SESSION, 30_000);
    expect(contextd.logLines().some((l) => l.sidecar === "recall" && l.msg === "bootstrapped from the transcript")).toBe(false);
  }, 120_000);

  it("a long session compacted natively before Assemble: the view, then the planted message recalled after it", async () => {
    const sessionId = "recall-auto";
    const long = codingSession({ turns: 40, seed: 5 });
    const planted = [user(`Before we start, for the record: ${FACT}. Keep it in mind.`), assistant("Noted, I will keep that in mind.")];
    const ids: string[] = [];
    const all = [...planted, ...long.messages];
    for (let i = 0; i < all.length; i += 25) ids.push(...(await cx.appendMessages({ session: { sessionId }, messages: all.slice(i, i + 25) })).entryIds);

    const res = await cx.assemble({ session: { sessionId }, tokenBudget: BUDGET, prompt: QUESTION });
    expect(res).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL });
    expect(res.compaction, "the host compacted natively before Assemble").toBeDefined();
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(sum(res.messages)).toBe(res.estimatedTokens);
    expect(toolPairViolations(res.messages)).toEqual([]);
    expect(isSummaryMessage(res.messages[0]!)).toBe(true);
    // The summary, then the view: a contiguous tail of the transcript ending with the latest user
    // message; then the block recalled for the question, the planted message in it.
    expect(res.systemPromptAddition).toMatch(NOTE);
    const view = res.messages.slice(1).filter((m) => !recalled(m));
    expect(view.length).toBeGreaterThan(1);
    expect(view.map((m) => m.id)).toEqual(ids.slice(ids.length - view.length));
    expect(view[0]!.role).not.toBe(Role.ROLE_TOOL_RESULT);
    expect(res.messages.slice(1, 1 + view.length)).toEqual(view);
    expect(res.messages.slice(1 + view.length).map((m) => m.id)).toContain(ids[0]);
  }, 120_000);

  it("an agent loop's consecutive answers are append-only under one system prompt addition: a provider's cache serves all but the new messages", async () => {
    const sessionId = "recall-auto";
    const session = { sessionId };
    const turns = codingSession({ turns: 4, seed: 9 }).messages;
    let previous = await cx.assemble({ session, tokenBudget: BUDGET });
    let checked = 0;
    // As a runtime runs its loop: before every model call (every assistant message) the messages
    // since the last one are appended and the context assembled.
    for (let i = 0; i < turns.length; i++) {
      if (turns[i]!.role !== Role.ROLE_ASSISTANT || i === 0) continue;
      let from = i - 1;
      while (from > 0 && turns[from - 1]!.role !== Role.ROLE_ASSISTANT) from--;
      await cx.appendMessages({ session, messages: turns.slice(from, i) });
      const next = await cx.assemble({ session, tokenBudget: BUDGET });
      expect(next.engineId).toBe("recall");
      expect(next.estimatedTokens).toBeLessThanOrEqual(BUDGET);
      expect(next.systemPromptAddition).toBe(previous.systemPromptAddition);
      // A compaction (the host's, or the engine's ahead of the next turn) rewrites the summary: the
      // one place the prefix may change.
      if (!next.compaction && providerView(next.messages[0]!) === providerView(previous.messages[0]!)) {
        // Everything the previous call sent comes back first, unchanged.
        expect(next.messages.slice(0, previous.messages.length).map(providerView)).toEqual(previous.messages.map(providerView));
        checked++;
      }
      previous = next;
      await cx.appendMessages({ session, messages: [turns[i]!] });
    }
    expect(checked).toBeGreaterThan(3);
  }, 120_000);

  it("a prompt of stop words only recalls nothing", async () => {
    const res = await cx.assemble({ session: { sessionId: SESSION }, tokenBudget: BUDGET, prompt: "what did you say about that, and then?" });
    expect(res).toMatchObject({ engineId: "recall", mode: Mode.MODE_NORMAL });
    expect(res.messages.map((m) => m.id)).not.toContain(plantedId);
    expect(res.messages.filter(recalled)).toEqual([]);
  });
});
