/**
 * Compaction never commits a summary that says nothing: at every budget — down to 1 token — the
 * host's native compaction either proposes a summary that carries content from what it replaces
 * (at small budgets the identifiers and the latest request first) and fits the prompt budget, or
 * refuses with a reason. Both summarizers: `extractive`, and `openai` against a chat-completions
 * server on a real socket (chat-server.ts) that answers well, with boilerplate, or with nothing.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactionTarget, Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, summaryMessage, textMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { compactNative, MIN_SUMMARY_TOKENS, promptBudget, type NativeCompactionOutcome } from "../../../src/compaction/native-compaction.js";
import { carriesContent } from "../../../src/compaction/summary-content.js";
import { createSummarizer } from "../../../src/compaction/summarizer/create-summarizer.js";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import type { Summarizer } from "../../../src/compaction/summarizer/summarizer.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import { completion, promptOf, startChatServer, type ChatServer } from "../../summarizer/chat-server.js";

if (process.env.FC_SEED) fc.configureGlobal({ seed: Number(process.env.FC_SEED) });
const RUNS = Number(process.env.FC_RUNS ?? 60);

const tokenizer = createTokenizer("o200k_base");
const IDENTIFIERS = ["src/billing/invoice_rounding.ts", "BILL-4821", "roundHalfEven()", "ERR_CONN_RESET", "https://ci.example.dev/run/77", "v2.14.3"];
const FILLER = ["please", "look", "into", "the", "failing", "tests", "again", "and", "explain", "why", "they", "break", "now"];

interface Spec {
  turns: { ids: number[]; words: number; tool: boolean }[];
  latestId: number;
}

const arbSpec: fc.Arbitrary<Spec> = fc.record({
  turns: fc.array(
    fc.record({
      ids: fc.array(fc.integer({ min: 0, max: IDENTIFIERS.length - 1 }), { maxLength: 3 }),
      words: fc.integer({ min: 1, max: 40 }),
      tool: fc.boolean(),
    }),
    { minLength: 1, maxLength: 10 },
  ),
  latestId: fc.integer({ min: 0, max: IDENTIFIERS.length - 1 }),
});

function sentence(words: number, ids: number[], seed: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(FILLER[(seed + i) % FILLER.length]);
  ids.forEach((id, i) => out.splice(Math.min(out.length, 1 + i * 3), 0, IDENTIFIERS[id]));
  return out.join(" ");
}

/** The active view as the host stores it (entry ids, token counts), ending with the latest request. */
function build(spec: Spec): Message[] {
  const out: Message[] = [];
  let n = 0;
  const add = (m: Message) => out.push({ ...m, id: `e${++n}`, tokenCount: tokenizer.countMessage(m) });
  spec.turns.forEach((t, i) => {
    add(textMessage(Role.ROLE_USER, sentence(t.words, t.ids, i)));
    if (t.tool) {
      add(textMessage(Role.ROLE_ASSISTANT, "", { content: [toolCallBlock(`call_${i}`, "read_file", JSON.stringify({ path: IDENTIFIERS[t.ids[0] ?? 0] }))] }));
      add(textMessage(Role.ROLE_TOOL_RESULT, sentence(t.words, t.ids, i + 7), { toolCallId: `call_${i}`, toolName: "read_file" }));
    }
    add(textMessage(Role.ROLE_ASSISTANT, sentence(Math.ceil(t.words / 2), t.ids.slice(0, 1), i + 3)));
  });
  add(textMessage(Role.ROLE_USER, `Now fix ${IDENTIFIERS[spec.latestId]} so the rounding tests pass`));
  return out;
}

const SETTINGS = { reserveTokens: 16_384, keepRecentTokens: 20_000, summaryMaxChars: 16_000 };

async function check(messages: Message[], outcome: NativeCompactionOutcome, tokenBudget: number, target: CompactionTarget): Promise<void> {
  const budget = promptBudget(tokenBudget, SETTINGS.reserveTokens);
  const emptyTokens = tokenizer.countMessage(summaryMessage(""));
  if (!outcome.compacted) {
    // Forced, with messages to fold: the only way not to compact is a refusal that says why.
    expect(outcome.refused, outcome.reason).toBe(true);
    expect(outcome.reason).toMatch(/^refused: /);
    if (target !== CompactionTarget.COMPACTION_TARGET_THRESHOLD && budget - emptyTokens < MIN_SUMMARY_TOKENS) {
      expect(outcome.reason).toMatch(/cannot hold a useful summary/);
    }
    return;
  }
  const r = outcome.result!;
  const cut = r.firstKeptEntryId ? messages.findIndex((m) => m.id === r.firstKeptEntryId) : messages.length;
  const replaced = messages.slice(0, cut);
  expect(r.summary.trim()).not.toBe("");
  expect(await carriesContent(r.summary, "", replaced), r.summary).toBe(true);
  if (target !== CompactionTarget.COMPACTION_TARGET_THRESHOLD) expect(r.tokensAfter).toBeLessThanOrEqual(budget);
  // What a small summary holds comes first from the identifiers and the latest request it replaced.
  const replacedText = replaced.map(messageText).join("\n");
  const ids = IDENTIFIERS.filter((id) => replacedText.includes(id));
  const latest = [...replaced].reverse().find((m) => m.role === Role.ROLE_USER);
  const latestWords = latest
    ? messageText(latest)
        .split(" ")
        .filter((w) => w.length >= 3)
    : [];
  const holdsKeyFact = ids.some((id) => r.summary.includes(id)) || latestWords.some((w) => r.summary.includes(w));
  if (ids.length > 0 || latestWords.length > 0) expect(holdsKeyFact, r.summary).toBe(true);
}

const arbBudget = fc.oneof(fc.integer({ min: 1, max: 120 }), fc.integer({ min: 120, max: 800 }));
const arbTarget = fc.constantFrom(CompactionTarget.COMPACTION_TARGET_BUDGET, CompactionTarget.COMPACTION_TARGET_THRESHOLD);

async function property(summarizer: () => Summarizer, runs: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(arbSpec, arbBudget, arbTarget, async (spec, tokenBudget, target) => {
      const messages = build(spec);
      const outcome = await compactNative({ messages, tokenBudget, target, force: true }, { summarizer: summarizer(), tokenizer, settings: SETTINGS });
      await check(messages, outcome, tokenBudget, target);
    }),
    { numRuns: runs },
  );
}

describe("a committed summary always says something of what it replaced", () => {
  it("extractive: at every budget from 1 token up, a summary holding the identifiers or the latest request that fits, or a refusal with its reason", async () => {
    await property(createExtractiveSummarizer, RUNS * 4);
  });

  it("16 messages naming four identifiers, forced BUDGET compactions: refused at 30 and 60 tokens (no room for a useful summary), a summary naming an identifier at 120 and 250", async () => {
    const ids = IDENTIFIERS.slice(0, 4);
    const messages: Message[] = [];
    for (let i = 0; i < 16; i++) {
      const m = textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, `Step ${i}: check ${ids[i % 4]} and report back on ${ids[(i + 1) % 4]}.`);
      messages.push({ ...m, id: `e${i + 1}`, tokenCount: tokenizer.countMessage(m) });
    }
    const seen: Record<number, string> = {};
    for (const tokenBudget of [30, 60, 120, 250]) {
      const outcome = await compactNative(
        { messages, tokenBudget, target: CompactionTarget.COMPACTION_TARGET_BUDGET, force: true },
        { summarizer: createExtractiveSummarizer(), tokenizer, settings: SETTINGS },
      );
      await check(messages, outcome, tokenBudget, CompactionTarget.COMPACTION_TARGET_BUDGET);
      seen[tokenBudget] = outcome.compacted ? outcome.result!.summary : outcome.reason;
    }
    // 30 and 60 leave 15 and 30 tokens of prompt budget: less than the summary message's wrapper.
    expect(seen[30]).toMatch(/^refused: a prompt budget of 15 tokens cannot hold a useful summary/);
    expect(seen[60]).toMatch(/^refused: a prompt budget of 30 tokens cannot hold a useful summary/);
    for (const b of [120, 250]) expect(ids.filter((id) => seen[b].includes(id)).length, seen[b]).toBeGreaterThanOrEqual(1);
  });

  describe("openai, against a chat-completions server", () => {
    let server: ChatServer;
    beforeAll(async () => {
      server = await startChatServer();
    });
    afterAll(async () => {
      await server?.close();
    });

    const openai = () =>
      createSummarizer(
        { kind: "openai", base_url: server.baseUrl, model: "summarizer-model", api_key_env: "KEY", max_retries: 0 },
        { env: { KEY: "k" }, countTokens: (t) => tokenizer.countText(t) },
      );

    it("a model that summarizes: its summary is committed when it fits and says something, else a refusal", async () => {
      server.respond = (req) => {
        const found = IDENTIFIERS.filter((id) => promptOf(req).includes(id));
        return completion(`Worked on ${found.join(", ") || "the rounding tests"}; the user wants the rounding tests fixed.`);
      };
      await property(openai, RUNS);
    });

    it("a model that answers boilerplate or nothing: the extractive summary is written instead, never an empty one", async () => {
      let n = 0;
      server.respond = () => completion(++n % 2 ? "No summary available." : "   ");
      await property(openai, RUNS);
    });
  });
});
