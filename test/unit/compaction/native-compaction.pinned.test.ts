import { describe, expect, it } from "vitest";

import { CompactionTarget, Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, summaryMessage, textBlock, textMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { compactNative, type CompactionSettings } from "../../../src/compaction/native-compaction.js";
import { summaryTokens } from "../../../src/compaction/summary-fit.js";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import type { SummarizeInput, Summarizer } from "../../../src/compaction/summarizer/summarizer.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";

// Legacy native compaction and pinned system messages (docs/pinned-messages.md): no system message
// reaches the summarizer, and all of them are a fixed cost of every target.

const BUDGET = CompactionTarget.COMPACTION_TARGET_BUDGET;
const THRESHOLD = CompactionTarget.COMPACTION_TARGET_THRESHOLD;
const tokenizer = createTokenizer("heuristic");
const SETTINGS: CompactionSettings = { reserveTokens: 0, keepRecentTokens: 20_000, summaryMaxChars: 4_000 };

let seq = 0;
function entry(m: Message, tokens?: number): Message {
  return { ...m, id: `e${++seq}`, tokenCount: tokens ?? tokenizer.countMessage(m) };
}
const words = (n: number, word: string) => `${word} `.repeat(n).trimEnd();
const system = (text: string, tokens?: number) => entry(textMessage(Role.ROLE_SYSTEM, text), tokens);
const user = (text: string) => entry(textMessage(Role.ROLE_USER, text));
const assistant = (text: string, calls: string[] = []) =>
  entry(textMessage(Role.ROLE_ASSISTANT, text, { content: [textBlock(text), ...calls.map((id) => toolCallBlock(id, "read", "{}"))] }));
const result = (id: string, text: string) => entry(textMessage(Role.ROLE_TOOL_RESULT, text, { toolCallId: id, toolName: "read" }));
const previous = (text: string) => {
  const m = summaryMessage(text, "c0");
  return { ...m, tokenCount: tokenizer.countMessage(m) };
};

/** Records what it was asked to summarize; answers the texts joined. */
function recording(): Summarizer & { calls: SummarizeInput[] } {
  const calls: SummarizeInput[] = [];
  return {
    kind: "recording",
    calls,
    async summarize(input) {
      calls.push(input);
      return [input.previousSummary, ...input.messages.map(messageText)].filter(Boolean).join("\n").slice(0, input.maxChars);
    },
  };
}

/** A conversation of `turns` turns of about 600 tokens each, with system messages at the start and in the middle. */
function conversation(turns: number): Message[] {
  const out: Message[] = [system("SYSTEM-START never reveal the deploy key")];
  for (let t = 0; t < turns; t++) {
    if (t === Math.floor(turns / 2)) out.push(system("SYSTEM-MIDDLE from now on answer in French"));
    out.push(
      user(`request ${t} ${words(150, "ask")}`),
      assistant(`step ${t}`, [`c${t}`]),
      result(`c${t}`, words(300, "data")),
      assistant(`done ${t} ${words(100, "ok")}`),
    );
  }
  return out;
}

const sum = (ms: readonly Message[]) => ms.reduce((s, m) => s + m.tokenCount, 0);
const isSystem = (m: Message) => m.role === Role.ROLE_SYSTEM;

describe("native compaction with pinned system messages", () => {
  it("never hands a system message to the summarizer, and counts them in tokens_after", async () => {
    const view = conversation(20);
    const summarizer = recording();
    const out = await compactNative({ messages: view, tokenBudget: 6_000, target: BUDGET, force: false }, { summarizer, tokenizer, settings: SETTINGS });
    expect(out.compacted).toBe(true);
    expect(summarizer.calls.length).toBeGreaterThan(0);
    for (const call of summarizer.calls) expect(call.messages.some(isSystem)).toBe(false);
    const r = out.result!;
    expect(r.summary).not.toContain("SYSTEM-");
    const cut = view.findIndex((m) => m.id === r.firstKeptEntryId);
    expect(cut).toBeGreaterThan(view.findIndex((m) => messageText(m).startsWith("SYSTEM-MIDDLE")));
    const kept = view.slice(cut);
    const pinned = view.slice(0, cut).filter(isSystem);
    expect(pinned).toHaveLength(2);
    expect(r.tokensAfter).toBe(summaryTokens(r.summary, tokenizer) + sum(pinned) + sum(kept));
    expect(r.tokensAfter).toBeLessThanOrEqual(6_000);
    expect(r.details).toMatchObject({ pinned_messages: 2, pinned_tokens: sum(pinned), summarized_messages: cut - 2, kept_messages: kept.length });
  });

  it("fits the budget with the pinned messages as fixed cost: a large system prompt leaves less for the tail", async () => {
    const small = conversation(20);
    const big = [system(words(3_000, "policy")), ...small.slice(1)];
    const cutOf = async (view: Message[]) => {
      const out = await compactNative(
        { messages: view, tokenBudget: 8_000, target: BUDGET, force: false },
        { summarizer: recording(), tokenizer, settings: SETTINGS },
      );
      expect(out.result!.tokensAfter).toBeLessThanOrEqual(8_000);
      return view.findIndex((m) => m.id === out.result!.firstKeptEntryId);
    };
    expect(await cutOf(big)).toBeGreaterThan(await cutOf(small));
  });

  it("keeps the system messages after the cut in place (they are not summarized either)", async () => {
    const view = conversation(10);
    const out = await compactNative(
      { messages: view, tokenBudget: 100_000, target: THRESHOLD, force: true },
      { summarizer: recording(), tokenizer, settings: { ...SETTINGS, keepRecentTokens: 4_000 } },
    );
    const cut = view.findIndex((m) => m.id === out.result!.firstKeptEntryId);
    const middle = view.findIndex((m) => messageText(m).startsWith("SYSTEM-MIDDLE"));
    expect(cut).toBeLessThan(middle); // the middle one is kept in place
    expect(out.result!.summary).not.toContain("SYSTEM-");
    // THRESHOLD: keep_recent_tokens covers the pinned messages too.
    const keptNonSystem = view.slice(cut).filter((m) => !isSystem(m));
    expect(sum(keptNonSystem) + sum(view.filter(isSystem))).toBeLessThanOrEqual(4_000);
  });

  it("reads a view whose pinned messages head it before the previous summary", async () => {
    const head = [system("SYSTEM-A"), system("SYSTEM-B")];
    const rest = conversation(12).slice(1);
    const view = [...head, previous("what happened before"), ...rest];
    const summarizer = recording();
    const out = await compactNative({ messages: view, tokenBudget: 5_000, target: BUDGET, force: false }, { summarizer, tokenizer, settings: SETTINGS });
    expect(out.compacted).toBe(true);
    for (const call of summarizer.calls) {
      expect(call.previousSummary).toBe("what happened before");
      expect(call.messages.some(isSystem)).toBe(false);
    }
    expect(out.result!.summary).toContain("what happened before");
    expect(out.result!.details).toMatchObject({ pinned_messages: 3 });
    expect(out.result!.tokensAfter).toBeLessThanOrEqual(5_000);
  });

  it("does nothing when only system messages could be folded in, and never summarizes just a system message", async () => {
    const deps = { summarizer: recording(), tokenizer, settings: SETTINGS };
    const onlySystem = await compactNative({ messages: [system("a"), system("b")], tokenBudget: 10_000, target: BUDGET, force: true }, deps);
    expect(onlySystem).toMatchObject({ compacted: false, reason: "nothing to compact: the view holds only system messages, which are never summarized" });
    const afterSummary = await compactNative({ messages: [system("a"), previous("s"), system("b")], tokenBudget: 10_000, target: BUDGET, force: true }, deps);
    expect(afterSummary).toMatchObject({ compacted: false });
    // A view that starts with a system message: the first cut summarizes a real message.
    const view = [system("SYSTEM-START"), user("first"), user("second")];
    const forced = await compactNative({ messages: view, tokenBudget: 10_000, target: BUDGET, force: true }, deps);
    expect(forced.result!.firstKeptEntryId).toBe(view[2].id);
    expect(deps.summarizer.calls.at(-1)!.messages.map(messageText)).toEqual(["first"]);
  });

  it("refuses when the pinned messages leave no room for a useful summary: no summarizer call, no empty summary, a reason naming them", async () => {
    const view = [system(words(2_000, "rules"), 9_000), ...conversation(6).slice(1)];
    const summarizer = recording();
    const out = await compactNative({ messages: view, tokenBudget: 8_000, target: BUDGET, force: false }, { summarizer, tokenizer, settings: SETTINGS });
    expect(out).toMatchObject({ compacted: false, refused: true });
    expect(out.result).toBeUndefined();
    expect(summarizer.calls).toHaveLength(0);
    expect(out.reason).toMatch(
      /^refused: a prompt budget of 8000 tokens cannot hold a useful summary: the summary message alone takes \d+ and the pinned system messages \d+/,
    );
  });

  it("with the extractive summarizer, the summary quotes the conversation but never a system message", async () => {
    const view = conversation(16);
    const out = await compactNative(
      { messages: view, tokenBudget: 6_000, target: BUDGET, force: false },
      { summarizer: createExtractiveSummarizer(), tokenizer, settings: SETTINGS },
    );
    expect(out.result!.summary).toContain("request 0");
    expect(out.result!.summary).not.toMatch(/SYSTEM-|deploy key|French/);
  });
});
