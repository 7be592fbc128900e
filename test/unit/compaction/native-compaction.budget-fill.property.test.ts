/**
 * Property: a BUDGET compaction fills the prompt budget (docs/concepts.md, "Budgets" and "Compaction").
 *
 * Sessions are an agent's: optionally a system message, then turns of a user message, any number of
 * tool call/result pairs of random sizes (an assistant message with one or two calls, then their
 * results), and an assistant text; the session ends with a turn in progress or with a user request
 * not yet answered. Random windows, reserves, summary caps and summarizers (well-behaved, writing
 * half of what it may, or ignoring maxChars).
 *
 * After a BUDGET compaction, the assembled context — what `legacy` answers: the system messages,
 * the summary message, the kept tail (`tokensAfter` counts exactly these) — is:
 *   - within the prompt budget B = promptBudget(window, reserve_tokens);
 *   - made of whole tool pairs: no kept tool result without its call, no kept call without its result;
 *   - holding the latest user message verbatim: kept as a message, or, when the cut falls after it
 *     (its own turn was too big), its text verbatim in the summary;
 *   - at least 80 % of B whenever the history holds that much, which here means all three of:
 *       (a) the messages after the first one that are not system messages total at least B − the
 *           system messages' tokens (there is enough history to fill the budget: the first message
 *           is always summarized);
 *       (b) every step — a user message, an assistant text, or an assistant message with its tool
 *           calls together with their results, the smallest pieces a cut can keep — is at most 10 %
 *           of B (a budget cannot be filled with pieces that do not fit it);
 *       (c) keep_recent_tokens ≥ B (the operator's cap on the verbatim tail does not bind: under
 *           BUDGET the tail is min(keep_recent_tokens, what the summary leaves)).
 *     The runs where (a)–(c) hold are counted, and the test fails if too few of them were drawn.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { messageText, summaryMessage, textBlock, textMessage, toolCallBlock, toolCallIds } from "../../../src/contract/messages.js";
import { CompactionTarget, Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import type { Tokenizer } from "../../../src/tokens/tokenizer.js";
import type { Summarizer } from "../../../src/compaction/summarizer/summarizer.js";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import { compactNative, promptBudget, type CompactionSettings } from "../../../src/compaction/native-compaction.js";

// Replay a run: FC_SEED=<seed printed by a failure> npx vitest run <this file>.
if (process.env.FC_SEED) fc.configureGlobal({ seed: Number(process.env.FC_SEED) });

// ---- sessions -----------------------------------------------------------------------------------

interface StepSpec {
  textTokens: number;
  results: number[];
}
interface TurnSpec {
  userTokens: number;
  steps: StepSpec[];
  closingTokens: number;
}
interface SessionSpec {
  systemTokens: number | null;
  turns: TurnSpec[];
  endsWithRequest: boolean;
  requestTokens: number;
}

// Mostly the sizes of real tool results; now and then one larger than many budgets.
const resultTokens = fc.oneof(
  { weight: 1_000, arbitrary: fc.integer({ min: 5, max: 1_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 3_000, max: 60_000 }) },
);
const arbStep: fc.Arbitrary<StepSpec> = fc.record({
  textTokens: fc.integer({ min: 0, max: 120 }),
  results: fc.oneof({ weight: 5, arbitrary: fc.tuple(resultTokens) }, { weight: 1, arbitrary: fc.tuple(resultTokens, resultTokens) }),
});
const arbTurn: fc.Arbitrary<TurnSpec> = fc.record({
  userTokens: fc.integer({ min: 3, max: 80 }),
  steps: fc.array(arbStep, { maxLength: 60, size: "max" }),
  closingTokens: fc.integer({ min: 0, max: 300 }),
});
const arbSession: fc.Arbitrary<SessionSpec> = fc.record({
  systemTokens: fc.option(fc.integer({ min: 10, max: 600 }), { freq: 3 }),
  turns: fc.array(arbTurn, { minLength: 1, maxLength: 6, size: "max" }),
  endsWithRequest: fc.boolean(),
  requestTokens: fc.integer({ min: 3, max: 80 }),
});

/** About `tokens` tokens of text for the heuristic tokenizer (4 ASCII chars a token), unique per seed. */
function text(tokens: number, seed: number): string {
  const unit = `w${seed.toString(36)} lorem ipsum `;
  return unit
    .repeat(Math.max(1, Math.ceil((tokens * 4) / unit.length)))
    .slice(0, Math.max(4, tokens * 4))
    .trimEnd();
}

function build(spec: SessionSpec, tokenizer: Tokenizer): Message[] {
  let seq = 0;
  const entry = (m: Message): Message => ({ ...m, id: `e${++seq}`, tokenCount: tokenizer.countMessage(m) });
  const out: Message[] = [];
  if (spec.systemTokens !== null) out.push(entry(textMessage(Role.ROLE_SYSTEM, text(spec.systemTokens, 0))));
  spec.turns.forEach((turn, t) => {
    out.push(entry(textMessage(Role.ROLE_USER, `request ${t}: ${text(turn.userTokens, seq)}`)));
    for (const step of turn.steps) {
      const ids = step.results.map((_, i) => `call_${seq}_${i}`);
      const content = [
        ...(step.textTokens > 0 ? [textBlock(text(step.textTokens, seq))] : []),
        ...ids.map((id) => toolCallBlock(id, "read_file", `{"path":"src/${id}.ts"}`)),
      ];
      out.push(entry(textMessage(Role.ROLE_ASSISTANT, "", { content })));
      step.results.forEach((tokens, i) =>
        out.push(entry(textMessage(Role.ROLE_TOOL_RESULT, text(tokens, seq), { toolCallId: ids[i], toolName: "read_file" }))),
      );
    }
    if (turn.closingTokens > 0) out.push(entry(textMessage(Role.ROLE_ASSISTANT, text(turn.closingTokens, seq))));
  });
  if (spec.endsWithRequest) out.push(entry(textMessage(Role.ROLE_USER, `pending request: ${text(spec.requestTokens, seq)}`)));
  return out;
}

// ---- summarizers (each writes a summary that only grows with what it is given) ------------------

function makeSummarizer(kind: "concat" | "half" | "verbose"): Summarizer {
  return {
    kind,
    async summarize(input) {
      const limit = kind === "half" ? Math.floor(input.maxChars / 2) : kind === "concat" ? input.maxChars : 200_000;
      let all = input.previousSummary;
      for (const m of input.messages) {
        if (all.length >= limit) break;
        all += (all ? "\n" : "") + messageText(m).slice(0, limit);
      }
      if (kind === "verbose") all += "\n" + text(40_000, 9); // ignores maxChars
      return all.slice(0, limit);
    },
  };
}

// ---- the property -------------------------------------------------------------------------------

/** The pieces a cut can keep: a message, or an assistant message with the results of its calls. */
function steps(messages: Message[]): number[] {
  const out: number[] = [];
  for (const m of messages) {
    if (m.role === Role.ROLE_SYSTEM) continue;
    if (m.role === Role.ROLE_TOOL_RESULT && out.length > 0) out[out.length - 1] += m.tokenCount;
    else out.push(m.tokenCount);
  }
  return out;
}

interface Tally {
  runs: number;
  compacted: number;
  holds: number;
}

function fillProperty(tokenizer: Tokenizer, tally: Tally, summarizers: fc.Arbitrary<Summarizer>) {
  return fc.asyncProperty(
    arbSession,
    fc.integer({ min: 24_000, max: 72_000 }),
    fc.integer({ min: 0, max: 16_384 }),
    fc.integer({ min: 1_000, max: 20_000 }),
    fc.oneof({ weight: 4, arbitrary: fc.constant(1_000_000) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 30_000 }) }),
    summarizers,
    async (spec, tokenBudget, reserveTokens, summaryMaxChars, keepRecentTokens, summarizer) => {
      tally.runs++;
      const messages = build(spec, tokenizer);
      const settings: CompactionSettings = { reserveTokens, keepRecentTokens, summaryMaxChars };
      const budget = promptBudget(tokenBudget, reserveTokens);
      const target = CompactionTarget.COMPACTION_TARGET_BUDGET;
      const outcome = await compactNative({ messages, tokenBudget, target, force: false }, { summarizer, tokenizer, settings });
      const total = messages.reduce((s, m) => s + m.tokenCount, 0);
      if (!outcome.compacted) {
        expect(total).toBeLessThanOrEqual(budget); // nothing to do: the whole view is assembled
        return;
      }
      tally.compacted++;
      const r = outcome.result!;
      const systems = messages.filter((m) => m.role === Role.ROLE_SYSTEM);
      const cut = r.firstKeptEntryId === "" ? messages.length : messages.findIndex((m) => m.id === r.firstKeptEntryId);
      expect(cut).toBeGreaterThan(0);
      const kept = messages.slice(cut).filter((m) => m.role !== Role.ROLE_SYSTEM);
      const assembled = [...systems, summaryMessage(r.summary), ...kept];
      const assembledTokens = assembled.reduce((s, m) => s + (m.tokenCount || tokenizer.countMessage(m)), 0);

      // within the budget, and tokensAfter is exactly what is assembled
      expect(r.tokensAfter).toBe(assembledTokens);
      expect(assembledTokens).toBeLessThanOrEqual(budget);

      // whole tool pairs
      const calls = new Set(kept.flatMap(toolCallIds));
      const results = new Set(kept.filter((m) => m.role === Role.ROLE_TOOL_RESULT).map((m) => m.toolCallId));
      for (const id of calls) expect(results.has(id), `call ${id} kept without its result`).toBe(true);
      for (const id of results) expect(calls.has(id), `result ${id} kept without its call`).toBe(true);

      // the latest user message, verbatim
      const latest = messages.filter((m) => m.role === Role.ROLE_USER).at(-1)!;
      const present = kept.includes(latest) || r.summary.includes(messageText(latest));
      expect(present, `latest user message lost (cut ${cut} of ${messages.length}, details ${JSON.stringify(r.details)})`).toBe(true);

      // ≥ 80 % of the budget whenever the history holds that much (see the file's doc comment)
      const pinned = systems.reduce((s, m) => s + m.tokenCount, 0);
      const afterFirst = messages
        .slice(1)
        .filter((m) => m.role !== Role.ROLE_SYSTEM)
        .reduce((s, m) => s + m.tokenCount, 0);
      const holds = afterFirst >= budget - pinned && Math.max(...steps(messages)) <= 0.1 * budget && keepRecentTokens >= budget;
      if (!holds) return;
      tally.holds++;
      expect(assembledTokens, `assembled ${assembledTokens} of ${budget} (details ${JSON.stringify(r.details)})`).toBeGreaterThanOrEqual(0.8 * budget);
    },
  );
}

const arbTestSummarizer = fc.constantFrom("concat", "concat", "half", "verbose").map(makeSummarizer);

describe("BUDGET compaction fills the prompt budget", () => {
  it("whole tool pairs, the latest request verbatim, ≤ the budget and ≥ 80 % of it when the history holds that much", async () => {
    const tally: Tally = { runs: 0, compacted: 0, holds: 0 };
    await fc.assert(fillProperty(createTokenizer("heuristic"), tally, arbTestSummarizer), { numRuns: 150 });
    // not vacuous: most runs compact, and many hold enough history for the 80 % check
    expect(tally.compacted).toBeGreaterThan(tally.runs * 0.5);
    expect(tally.holds).toBeGreaterThan(tally.runs * 0.2);
  });

  it("the same with the extractive summarizer", async () => {
    const tally: Tally = { runs: 0, compacted: 0, holds: 0 };
    await fc.assert(fillProperty(createTokenizer("heuristic"), tally, fc.constant(createExtractiveSummarizer())), { numRuns: 40 });
    expect(tally.holds).toBeGreaterThan(tally.runs * 0.2);
  });
});
