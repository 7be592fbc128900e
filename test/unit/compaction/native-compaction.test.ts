import { describe, expect, it } from "vitest";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import { messageText, summaryMessage, summaryOf, textBlock, textMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { CompactionTarget, Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import type { Tokenizer } from "../../../src/tokens/tokenizer.js";
import type { SummarizeInput, Summarizer } from "../../../src/compaction/summarizer/summarizer.js";
import {
  compactNative,
  promptBudget,
  type CompactionSettings,
  type NativeCompactionInput,
  type NativeCompactionOutcome,
} from "../../../src/compaction/native-compaction.js";

const BUDGET = CompactionTarget.COMPACTION_TARGET_BUDGET;
const THRESHOLD = CompactionTarget.COMPACTION_TARGET_THRESHOLD;
const heuristic = createTokenizer("heuristic");

/** Builds transcript entries the way the host stores them: an id and a token count each. */
class Transcript {
  private seq = 0;
  constructor(readonly tokenizer: Tokenizer = heuristic) {}
  private entry(m: Message): Message {
    return { ...m, id: `e${++this.seq}`, tokenCount: this.tokenizer.countMessage(m) };
  }
  user(text: string): Message {
    return this.entry(textMessage(Role.ROLE_USER, text));
  }
  assistant(text: string, calls: string[] = []): Message {
    return this.entry(
      textMessage(Role.ROLE_ASSISTANT, text, {
        content: [textBlock(text), ...calls.map((id) => toolCallBlock(id, "read_file", `{"path":"src/${id}.ts"}`))],
      }),
    );
  }
  result(callId: string, text: string): Message {
    return this.entry(textMessage(Role.ROLE_TOOL_RESULT, text, { toolCallId: callId, toolName: "read_file" }));
  }
  summary(text: string): Message {
    const m = summaryMessage(text, "c0");
    return { ...m, tokenCount: this.tokenizer.countMessage(m) };
  }
}

/** Deterministic: the previous summary and every summarized message's text, truncated to maxChars. */
function concatSummarizer(): Summarizer & { calls: SummarizeInput[] } {
  const calls: SummarizeInput[] = [];
  return {
    kind: "test-concat",
    calls,
    async summarize(input) {
      calls.push(input);
      const text = [input.previousSummary, ...input.messages.map(messageText)].filter(Boolean).join("\n");
      return text.slice(0, input.maxChars);
    },
  };
}

/** Ignores maxChars and always writes far too much. */
function verboseSummarizer(chars = 200_000): Summarizer & { calls: SummarizeInput[] } {
  const calls: SummarizeInput[] = [];
  return {
    kind: "test-verbose",
    calls,
    async summarize(input) {
      calls.push(input);
      return "the user asked me to look at many things and the assistant did more ".repeat(Math.ceil(chars / 68)).slice(0, chars);
    },
  };
}

const words = (n: number, word = "lorem"): string => `${word} `.repeat(n).trimEnd();

const SETTINGS: CompactionSettings = { reserveTokens: 16_384, keepRecentTokens: 20_000, summaryMaxChars: 16_000 };

function run(
  input: Partial<NativeCompactionInput> & { messages: Message[] },
  summarizer: Summarizer = concatSummarizer(),
  settings: Partial<CompactionSettings> = {},
  tokenizer: Tokenizer = heuristic,
): Promise<NativeCompactionOutcome> {
  return compactNative({ tokenBudget: 128_000, target: BUDGET, force: false, ...input }, { summarizer, tokenizer, settings: { ...SETTINGS, ...settings } });
}

/** tokensAfter recomputed from scratch: the summary message plus the kept entries' stored counts. */
function recomputeAfter(messages: Message[], outcome: NativeCompactionOutcome, tokenizer: Tokenizer = heuristic): number {
  const r = outcome.result!;
  const kept = keptOf(messages, r.firstKeptEntryId);
  return tokenizer.countMessage(summaryMessage(r.summary)) + kept.reduce((s, m) => s + m.tokenCount, 0);
}

function keptOf(messages: Message[], firstKeptEntryId: string): Message[] {
  if (!firstKeptEntryId) return [];
  const i = messages.findIndex((m) => m.id === firstKeptEntryId);
  expect(i).toBeGreaterThanOrEqual(0);
  return messages.slice(i);
}

/** A long conversation: `turns` turns of ~`perTurn` tokens, each with a tool call and its result. */
function conversation(t: Transcript, turns: number, perTurn = 2_000): Message[] {
  const out: Message[] = [];
  for (let i = 0; i < turns; i++) {
    out.push(t.user(`turn ${i}: please look at src/mod${i}.ts`));
    out.push(t.assistant(`reading mod${i}`, [`call${i}`]));
    out.push(t.result(`call${i}`, words(Math.max(1, Math.floor(((perTurn - 60) * 4) / 6)), `w${i}`)));
    out.push(t.assistant(`done with turn ${i}`));
  }
  return out;
}

describe("compactNative — no-ops", () => {
  it("does nothing when the view already fits the prompt budget", async () => {
    const t = new Transcript();
    const messages = conversation(t, 3, 500);
    const out = await run({ messages, tokenBudget: 128_000 });
    expect(out.compacted).toBe(false);
    expect(out.reason).toMatch(/^within budget: \d+ of 111616 tokens$/);
    expect(out.result).toBeUndefined();
  });

  it("decides on the runtime's token count when given, and records its own count of the view before and after (the runtime's in details)", async () => {
    const t = new Transcript();
    const messages = conversation(t, 3, 500);
    const out = await run({ messages, tokenBudget: 128_000, currentTokenCount: 100_000 });
    expect(out.reason).toBe("within budget: 100000 of 111616 tokens");
    const over = await run({ messages, tokenBudget: 128_000, currentTokenCount: 120_000 });
    expect(over.compacted).toBe(true);
    const own = messages.reduce((sum, m) => sum + m.tokenCount, 0);
    expect(over.result!.tokensBefore).toBe(own);
    expect(over.result!.details).toMatchObject({ runtime_token_count: 120_000 });
    expect(over.reason).toContain(`(${own} → ${over.result!.tokensAfter} tokens)`);
  });

  it("does nothing under THRESHOLD while the view is within keep_recent_tokens", async () => {
    const t = new Transcript();
    const out = await run({ messages: conversation(t, 3, 500), target: THRESHOLD });
    expect(out.compacted).toBe(false);
    expect(out.reason).toMatch(/^below threshold: \d+ of 20000 keep_recent_tokens$/);
  });

  it("does nothing under THRESHOLD when only the previous summary pushes the view over", async () => {
    const t = new Transcript();
    const messages = [t.summary(words(4_000, "old")), ...conversation(t, 3, 500)];
    const out = await run({ messages, target: THRESHOLD }, concatSummarizer(), { keepRecentTokens: 3_000 });
    expect(out.compacted).toBe(false);
    expect(out.reason).toMatch(/^nothing to compact/);
  });

  it("has nothing to compact in an empty view or a summary-only view, even when forced", async () => {
    const t = new Transcript();
    for (const target of [BUDGET, THRESHOLD]) {
      expect((await run({ messages: [], force: true, target })).reason).toBe("nothing to compact: the view is empty");
      const out = await run({ messages: [t.summary("s")], force: true, target });
      expect(out.compacted).toBe(false);
      expect(out.reason).toMatch(/^nothing to compact/);
    }
  });

  it("rejects a non-positive token budget", async () => {
    await expect(run({ messages: [], tokenBudget: 0 })).rejects.toMatchObject({ name: "InvalidArgumentError" });
  });
});

describe("compactNative — cutting", () => {
  it("keeps the most recent turns within keep_recent_tokens and summarizes the rest", async () => {
    const t = new Transcript();
    const messages = conversation(t, 20, 2_000); // ~40k tokens
    const summarizer = concatSummarizer();
    const out = await run({ messages, target: THRESHOLD }, summarizer);
    const r = out.result!;
    expect(out.compacted).toBe(true);
    const kept = keptOf(messages, r.firstKeptEntryId);
    expect(kept[0].role).toBe(Role.ROLE_USER);
    expect(kept.reduce((s, m) => s + m.tokenCount, 0)).toBeLessThanOrEqual(20_000);
    // the earliest turn boundary: one more turn would not fit
    const i = messages.length - kept.length;
    expect(kept.reduce((s, m) => s + m.tokenCount, 0) + messages.slice(i - 4, i).reduce((s, m) => s + m.tokenCount, 0)).toBeGreaterThan(20_000);
    expect(r.details).toMatchObject({ summarizer: "test-concat", summarized_messages: i, kept_messages: kept.length, cut: "turn", iterations: 1 });
    expect(summarizer.calls).toHaveLength(1);
    expect(summarizer.calls[0].messages).toEqual(messages.slice(0, i));
    expect(r.tokensAfter).toBe(recomputeAfter(messages, out));
    expect(r.tokensBefore).toBe(messages.reduce((s, m) => s + m.tokenCount, 0));
  });

  it("never splits a tool call from its result", async () => {
    const t = new Transcript();
    // the keep budget falls between an assistant's tool calls and their (large) results
    const messages = [
      t.user("start"),
      t.assistant("old work"),
      t.user("now read both"),
      t.assistant("reading", ["a", "b"]),
      t.result("a", words(3_000)),
      t.result("b", words(3_000)),
      t.assistant("both read"),
    ];
    const out = await run({ messages, target: THRESHOLD, force: true }, concatSummarizer(), { keepRecentTokens: 5_000 });
    const kept = keptOf(messages, out.result!.firstKeptEntryId);
    // each result is ≈4500 tokens: the tail from result "b" would fit 5000 but a tool result is not a cut point,
    // and cutting before the call would keep ≈9000: keep only the last assistant
    expect(kept.map((m) => m.id)).toEqual([messages[6].id]);
    expect(out.result!.details).toMatchObject({ cut: "intra_turn" });
  });

  it("prefers a turn boundary and falls back to an intra-turn cut only when the last turn is too big", async () => {
    const t = new Transcript();
    const messages = [
      ...conversation(t, 4, 1_000),
      t.user("last turn"),
      t.assistant("step 1", ["x"]),
      t.result("x", words(2_000)),
      t.assistant("step 2", ["y"]),
      t.result("y", words(600)),
      t.assistant("final answer"),
    ];
    // the whole last turn (≈3950 tokens) fits 4200, the last two turns do not → turn cut
    const a = await run({ messages, target: THRESHOLD }, concatSummarizer(), { keepRecentTokens: 4_200 });
    expect(a.result!.details).toMatchObject({ cut: "turn" });
    expect(a.result!.firstKeptEntryId).toBe(messages[16].id);
    // 2000 tokens: no turn boundary fits; cut before "step 2"
    const b = await run({ messages, target: THRESHOLD }, concatSummarizer(), { keepRecentTokens: 2_000 });
    expect(b.result!.details).toMatchObject({ cut: "intra_turn" });
    expect(b.result!.firstKeptEntryId).toBe(messages[19].id);
    // 5 tokens: nothing fits; keep nothing
    const c = await run({ messages, target: THRESHOLD }, concatSummarizer(), { keepRecentTokens: 5 });
    expect(c.result!.details).toMatchObject({ cut: "none", kept_messages: 0 });
    expect(c.result!.firstKeptEntryId).toBe("");
  });

  it("folds the previous summary into the new one", async () => {
    const t = new Transcript();
    const previous = "GOAL: migrate the billing database; decided to use pg_dump";
    const messages = [t.summary(previous), ...conversation(t, 20, 2_000)];
    const summarizer = concatSummarizer();
    const out = await run({ messages, target: THRESHOLD, customInstructions: "focus on the migration" }, summarizer);
    expect(summarizer.calls[0].previousSummary).toBe(previous);
    expect(summarizer.calls[0].customInstructions).toBe("focus on the migration");
    expect(summarizer.calls[0].messages.some((m) => m.id === "c0")).toBe(false);
    expect(summarizer.calls[0].messages[0]).toBe(messages[1]);
    expect(out.result!.summary.startsWith(previous)).toBe(true);
    expect(out.result!.tokensBefore).toBe(messages.reduce((s, m) => s + m.tokenCount, 0));
    expect(out.result!.tokensAfter).toBe(recomputeAfter(messages, out));
  });

  it("compacts when forced even though the view fits, summarizing at least one message", async () => {
    const t = new Transcript();
    const messages = conversation(t, 3, 500);
    const out = await run({ messages, force: true });
    expect(out.compacted).toBe(true);
    expect(out.result!.details!.summarized_messages).toBeGreaterThanOrEqual(1);
    expect(out.result!.firstKeptEntryId).toBe(messages[4].id); // the second turn
  });

  it("caps a summary that ignores maxChars", async () => {
    const t = new Transcript();
    const out = await run({ messages: conversation(t, 20, 2_000), target: THRESHOLD }, verboseSummarizer(), { summaryMaxChars: 1_000 });
    expect(out.result!.summary.length).toBeLessThanOrEqual(1_000);
  });
});

describe("compactNative — BUDGET", () => {
  it("moves the cut later and re-summarizes when the summary is larger than estimated", async () => {
    const t = new Transcript();
    const messages: Message[] = [];
    // Non-ASCII text: ~1.5 chars a token for the heuristic tokenizer, so a summary of the capped
    // length (estimated at 4 chars a token) is far larger in tokens than estimated.
    for (let i = 0; i < 30; i++) messages.push(t.user(words(100, "q")), t.assistant(words(300, "réponse")));
    const summarizer = concatSummarizer();
    const out = await run({ messages, tokenBudget: 16_000 }, summarizer, { summaryMaxChars: 20_000 });
    const r = out.result!;
    const cuts = summarizer.calls.map((c) => c.messages.length);
    expect(cuts.length).toBeGreaterThanOrEqual(2);
    expect(cuts[1]).toBeGreaterThan(cuts[0]);
    expect(r.details).toMatchObject({ iterations: cuts.length });
    expect(r.firstKeptEntryId).toBe(messages[r.details!.summarized_messages as number].id);
    expect(r.tokensAfter).toBeLessThanOrEqual(8_000);
    expect(r.tokensAfter).toBe(recomputeAfter(messages, out));
  });

  it("fits the prompt budget when the summarizer ignores maxChars", async () => {
    const t = new Transcript();
    const messages = conversation(t, 30, 1_000);
    const out = await run({ messages, tokenBudget: 24_000 }, verboseSummarizer(), { summaryMaxChars: 30_000 });
    expect(out.result!.tokensAfter).toBeLessThanOrEqual(promptBudget(24_000, SETTINGS.reserveTokens));
    expect(out.result!.tokensAfter).toBe(recomputeAfter(messages, out));
  });

  it("converges when the most recent turn alone is far over the budget", async () => {
    const t = new Transcript();
    const messages = [...conversation(t, 3, 500), t.user("read the log"), t.assistant("reading", ["log"]), t.result("log", words(200_000))];
    for (const summarizer of [concatSummarizer(), verboseSummarizer()]) {
      const started = Date.now();
      const out = await run({ messages, tokenBudget: 16_000 }, summarizer);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(out.compacted).toBe(true);
      expect(out.result!.firstKeptEntryId).toBe("");
      expect(out.result!.details).toMatchObject({ cut: "none", kept_messages: 0 });
      expect(out.result!.tokensAfter).toBeLessThanOrEqual(promptBudget(16_000, SETTINGS.reserveTokens));
      expect(summarizer.calls.length).toBeLessThanOrEqual(8);
    }
  });

  it("shrinks a previous summary that alone exceeds the budget", async () => {
    const t = new Transcript();
    const messages = [t.summary(words(20_000, "old"))];
    const out = await run({ messages, tokenBudget: 8_000 }, concatSummarizer(), { summaryMaxChars: 100_000 });
    expect(out.compacted).toBe(true);
    expect(out.result!.firstKeptEntryId).toBe("");
    expect(out.result!.tokensAfter).toBeLessThanOrEqual(promptBudget(8_000, SETTINGS.reserveTokens));
  });

  it("fits with the o200k_base tokenizer", async () => {
    const o200k = createTokenizer("o200k_base");
    const t = new Transcript(o200k);
    const messages = [t.summary("earlier: fixed TypeError in src/app.ts:42"), ...conversation(t, 15, 1_500)];
    const out = await run({ messages, tokenBudget: 20_000 }, concatSummarizer(), {}, o200k);
    expect(out.compacted).toBe(true);
    expect(out.result!.tokensAfter).toBeLessThanOrEqual(promptBudget(20_000, SETTINGS.reserveTokens));
    expect(out.result!.tokensAfter).toBe(recomputeAfter(messages, out, o200k));
  });
});

describe("compactNative — abort", () => {
  it("rejects with AbortError when already aborted", async () => {
    const t = new Transcript();
    const controller = new AbortController();
    controller.abort();
    await expect(run({ messages: conversation(t, 20, 2_000), signal: controller.signal })).rejects.toMatchObject({ name: "AbortError" });
  });

  it("rejects with AbortError when aborted between iterations", async () => {
    const t = new Transcript();
    const controller = new AbortController();
    const inner = verboseSummarizer();
    const summarizer: Summarizer = {
      kind: "aborting",
      async summarize(input) {
        expect(input.signal).toBe(controller.signal);
        const text = await inner.summarize(input);
        controller.abort(); // the caller gives up while the first (too large) summary is being written
        return text;
      },
    };
    await expect(run({ messages: conversation(t, 30, 1_000), tokenBudget: 24_000, signal: controller.signal }, summarizer)).rejects.toMatchObject({
      name: "AbortError",
    });
    expect(inner.calls).toHaveLength(1);
  });
});

describe("compactNative with the extractive summarizer", () => {
  it("fits the budget and records the summarizer kind", async () => {
    const summarizer = createExtractiveSummarizer();
    const t = new Transcript();
    const messages = [t.summary("Goal: ship v1"), ...conversation(t, 25, 1_500)];
    const out = await run({ messages, tokenBudget: 24_000 }, summarizer);
    expect(out.result!.details!.summarizer).toBe(summarizer.kind);
    expect(out.result!.tokensAfter).toBeLessThanOrEqual(promptBudget(24_000, SETTINGS.reserveTokens));
    expect(out.result!.tokensAfter).toBe(recomputeAfter(messages, out));
    expect(summaryOf(summaryMessage(out.result!.summary))).toBe(out.result!.summary);
  });
});
