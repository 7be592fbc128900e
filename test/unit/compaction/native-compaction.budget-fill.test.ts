/**
 * The case of issue 15 item 4, in process: a 150k-token coding session of 4 user turns, each with
 * dozens of large tool pairs, ending with the pending request, compacted natively for a 32k window.
 * It kept 0.28 of the prompt budget (the summary and the pending request: the only turn boundary
 * that fitted); it must keep ≥ 80 %, cutting inside the newest finished turn at a tool-pair
 * boundary. And when the cut falls after the latest user message, that message survives verbatim.
 */
import { describe, expect, it } from "vitest";
import { toolHeavySession } from "../../../bench/scenarios/budget_utilization.js";
import { messageText, summaryMessage, textBlock, textMessage, toolCallBlock, toolCallIds } from "../../../src/contract/messages.js";
import { CompactionTarget, Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import type { Tokenizer } from "../../../src/tokens/tokenizer.js";
import type { Summarizer } from "../../../src/compaction/summarizer/summarizer.js";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import { compactNative, promptBudget, type CompactionSettings } from "../../../src/compaction/native-compaction.js";
import { LATEST_REQUEST_HEADING } from "../../../src/compaction/latest-request.js";

const DEFAULTS: CompactionSettings = { reserveTokens: 16_384, keepRecentTokens: 20_000, summaryMaxChars: 16_000 };
const BUDGET = CompactionTarget.COMPACTION_TARGET_BUDGET;

function stored(messages: Message[], tokenizer: Tokenizer): Message[] {
  return messages.map((m, i) => ({ ...m, id: `e${i + 1}`, tokenCount: tokenizer.countMessage(m) }));
}

function keptOf(messages: Message[], firstKeptEntryId: string): Message[] {
  return firstKeptEntryId ? messages.slice(messages.findIndex((m) => m.id === firstKeptEntryId)) : [];
}

function expectWholePairs(kept: Message[]): void {
  const calls = new Set(kept.flatMap(toolCallIds));
  const results = new Set(kept.filter((m) => m.role === Role.ROLE_TOOL_RESULT).map((m) => m.toolCallId));
  expect([...calls].sort()).toEqual([...results].sort());
}

describe("BUDGET compaction of a tool-heavy agent session", () => {
  it("uses ≥ 80 % of the 32k window's prompt budget: the summary plus the newest whole tool pairs and the pending request", async () => {
    const tokenizer = createTokenizer("o200k_base");
    const { messages: raw, tokens } = toolHeavySession({ targetTokens: 150_000, userTurns: 4, seed: 1, tokenizer });
    expect(tokens).toBeGreaterThanOrEqual(150_000);
    const messages = stored(raw, tokenizer);
    const out = await compactNative(
      { messages, tokenBudget: 32_000, target: BUDGET, force: false },
      { summarizer: createExtractiveSummarizer(), tokenizer, settings: DEFAULTS },
    );
    const r = out.result!;
    const budget = promptBudget(32_000, DEFAULTS.reserveTokens);
    expect(budget).toBe(15_616);
    expect(r.tokensAfter).toBeLessThanOrEqual(budget);
    expect(r.tokensAfter).toBeGreaterThanOrEqual(0.8 * budget);
    const kept = keptOf(messages, r.firstKeptEntryId);
    expect(kept.at(-1)).toBe(messages.at(-1)); // the pending request, verbatim
    expect(kept.filter((m) => m.role === Role.ROLE_TOOL_RESULT).length).toBeGreaterThanOrEqual(5);
    expect(kept[0].role).toBe(Role.ROLE_ASSISTANT); // inside the last finished turn
    expect(r.details).toMatchObject({ cut: "intra_turn" });
    expectWholePairs(kept);
  });
});

describe("the latest user request when the cut falls inside its own turn", () => {
  const tokenizer = createTokenizer("heuristic");
  const request = "Fix the flaky test in src/ledger/sync.test.ts without touching the public API.";
  // One old turn, then the turn in progress: its request and 30 tool pairs of ~800 tokens — far
  // more than a 32k window's prompt budget, so the cut must fall inside it.
  const build = (): Message[] => {
    const out: Message[] = [
      textMessage(Role.ROLE_USER, "an old request"),
      textMessage(Role.ROLE_ASSISTANT, "an old answer"),
      textMessage(Role.ROLE_USER, request),
    ];
    for (let i = 0; i < 30; i++) {
      out.push(textMessage(Role.ROLE_ASSISTANT, "", { content: [textBlock(`step ${i}`), toolCallBlock(`c${i}`, "read_file", "{}")] }));
      out.push(textMessage(Role.ROLE_TOOL_RESULT, `line ${i} `.repeat(400), { toolCallId: `c${i}`, toolName: "read_file" }));
    }
    return stored(out, tokenizer);
  };
  // It says something of the history (read_file), but not the request the agent is working on.
  const forgetful: Summarizer = { kind: "forgetful", summarize: async () => "The agent has been calling read_file." };

  it("is quoted verbatim in the summary when the summarizer left it out", async () => {
    const messages = build();
    const out = await compactNative({ messages, tokenBudget: 32_000, target: BUDGET, force: false }, { summarizer: forgetful, tokenizer, settings: DEFAULTS });
    const r = out.result!;
    const kept = keptOf(messages, r.firstKeptEntryId);
    expect(kept).not.toContain(messages[2]);
    expect(r.summary).toBe(`The agent has been calling read_file.\n\n${LATEST_REQUEST_HEADING}\n${request}`);
    expect(r.details).toMatchObject({ latest_request_quoted: true, cut: "intra_turn" });
    expect(r.tokensAfter).toBe(tokenizer.countMessage(summaryMessage(r.summary)) + kept.reduce((s, m) => s + m.tokenCount, 0));
    expect(r.tokensAfter).toBeGreaterThanOrEqual(0.8 * promptBudget(32_000, DEFAULTS.reserveTokens));
    expectWholePairs(kept);
  });

  it("is not repeated when the summarizer kept it", async () => {
    // Like the extractive summarizer's "Latest user request" section: the user messages verbatim.
    const keeper: Summarizer = {
      kind: "keeper",
      summarize: async (input) =>
        input.messages
          .filter((m) => m.role === Role.ROLE_USER)
          .map(messageText)
          .join("\n")
          .slice(0, input.maxChars),
    };
    const messages = build();
    const out = await compactNative({ messages, tokenBudget: 32_000, target: BUDGET, force: false }, { summarizer: keeper, tokenizer, settings: DEFAULTS });
    const r = out.result!;
    expect(r.summary).toBe(`an old request\n${request}`);
    expect(r.details!.latest_request_quoted).toBeUndefined();
  });

  it("is left alone when the cut keeps it", async () => {
    const messages = [...build(), ...stored([textMessage(Role.ROLE_USER, "and now the next request")], tokenizer).map((m) => ({ ...m, id: "last" }))];
    const out = await compactNative({ messages, tokenBudget: 32_000, target: BUDGET, force: false }, { summarizer: forgetful, tokenizer, settings: DEFAULTS });
    expect(keptOf(messages, out.result!.firstKeptEntryId).at(-1)!.id).toBe("last");
    expect(out.result!.summary).toBe("The agent has been calling read_file.");
  });
});
