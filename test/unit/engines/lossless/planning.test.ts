/**
 * The pure parts: where a history may be cut (tool pairs), which chunk compaction takes next, how
 * a context is fitted to a budget, and which summaries condense. Property tests over synthetic
 * histories (histories.ts).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planContext } from "../../../../engines/lossless/assembler.js";
import { chunkEnd, minimalTailStart, protectedTailStart } from "../../../../engines/lossless/chunking.js";
import { promptBudget } from "../../../../engines/lossless/config.js";
import { condensableRun } from "../../../../engines/lossless/dag.js";
import { validStarts } from "../../../../engines/lossless/tool-pairs.js";
import { Role, type Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { toolPairViolations } from "../../../helpers/invariants.js";
import { buildHistory, latestUserIndex, meta, turnSpec } from "../../../engines-lossless/histories.js";

const history = fc
  .tuple(fc.array(turnSpec(), { minLength: 0, maxLength: 8 }), fc.option(fc.integer({ min: 5, max: 600 }), { nil: null }))
  .map(([turns, pending]) => buildHistory(turns, pending));

/** The included messages of a plan. */
function included(messages: Message[], segments: Array<[number, number]>): Message[] {
  return segments.flatMap(([s, e]) => messages.slice(s, e));
}

describe("tool pairs", () => {
  it("a suffix starting at a valid cut never holds a result without its call, nor a call without its result", () => {
    fc.assert(
      fc.property(history, (messages) => {
        const starts = validStarts(messages.map(meta));
        expect(starts[messages.length]).toBe(true);
        starts.forEach((ok, i) => {
          if (!ok) return;
          expect(toolPairViolations(messages.slice(i))).toEqual([]);
          expect(toolPairViolations(messages.slice(0, i))).toEqual([]);
        });
      }),
    );
  });

  it("never cuts before a tool result", () => {
    const messages = buildHistory([{ user: 10, exchanges: [{ assistant: 10, results: [10, 10] }], wrapUp: null }]);
    // user, assistant (2 calls), result, result, pending user request
    expect(validStarts(messages.map(meta))).toEqual([true, true, false, false, true, true]);
  });
});

describe("chunking", () => {
  it("the minimal tail starts at the latest user message", () => {
    fc.assert(
      fc.property(history, (messages) => {
        const u = latestUserIndex(messages);
        const start = minimalTailStart(messages.map(meta));
        if (u >= 0) expect(start).toBe(u);
      }),
    );
  });

  it("chunks end at valid cuts, stay within the chunk size when a cut allows it, and never reach into the protected tail", () => {
    fc.assert(
      fc.property(history, fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 1, max: 8000 }), (messages, protect, chunk) => {
        const metas = messages.map(meta);
        const starts = validStarts(metas);
        const limit = protectedTailStart(metas, protect, starts);
        expect(starts[limit] || limit === 0).toBe(true);
        expect(limit).toBeLessThanOrEqual(Math.max(0, minimalTailStart(metas, starts)));
        const end = chunkEnd(metas, limit, chunk, starts);
        expect(end).toBeLessThanOrEqual(limit);
        if (end === 0) return;
        expect(starts[end]).toBe(true);
        expect(toolPairViolations(messages.slice(0, end))).toEqual([]);
        const tokens = metas.slice(0, end).reduce((n, m) => n + m.tokenCount, 0);
        // Over the chunk size only when no shorter chunk ends at a valid cut.
        if (tokens > chunk) for (let c = 1; c < end; c++) expect(starts[c]).toBe(false);
      }),
    );
  });
});

describe("fitting a context to a budget", () => {
  const summaries = fc.array(fc.integer({ min: 50, max: 3000 }), { maxLength: 8 }).map((ts) => ts.map((tokenCount) => ({ tokenCount })));

  it("never exceeds the budget, keeps tool pairs and the latest user message, and drops the oldest summaries first", () => {
    fc.assert(
      fc.property(history, summaries, fc.integer({ min: 0, max: 60_000 }), (messages, sums, budget) => {
        const plan = planContext({ summaries: sums, raw: messages.map(meta), budget });
        const kept = included(messages, plan.segments);
        const keptSummaryTokens = sums.slice(plan.firstSummary).reduce((n, s) => n + s.tokenCount, 0);
        expect(plan.tokens).toBe(keptSummaryTokens + kept.reduce((n, m) => n + m.tokenCount, 0));
        const u = latestUserIndex(messages);
        if (plan.overflow) {
          // Only when the request being answered alone is over the budget.
          expect(kept).toEqual([messages[u]]);
          expect(messages[u].tokenCount).toBeGreaterThan(budget);
          return;
        }
        expect(plan.tokens).toBeLessThanOrEqual(budget);
        expect(toolPairViolations(kept)).toEqual([]);
        if (u >= 0) expect(kept).toContain(messages[u]);
        // Everything, when everything fits.
        const all = sums.reduce((n, s) => n + s.tokenCount, 0) + messages.reduce((n, m) => n + m.tokenCount, 0);
        if (all <= budget) expect(plan.firstSummary === 0 && kept.length === messages.length).toBe(true);
        // Segments are in order and do not overlap.
        for (let i = 1; i < plan.segments.length; i++) expect(plan.segments[i][0]).toBeGreaterThanOrEqual(plan.segments[i - 1][1]);
      }),
      { numRuns: 300 },
    );
  });

  it("puts the summaries first and fills the rest with the newest raw messages, dropping the oldest summaries when needed", () => {
    // Two turns of 1300 tokens (user 100, call 100, result 1000, wrap-up 100) and a pending request.
    const messages = buildHistory(
      [
        { user: 100, exchanges: [{ assistant: 100, results: [1000] }], wrapUp: 100 },
        { user: 100, exchanges: [{ assistant: 100, results: [1000] }], wrapUp: 100 },
      ],
      100,
    );
    const raw = messages.map(meta);
    const sums = [{ tokenCount: 500 }, { tokenCount: 500 }];
    expect(planContext({ summaries: sums, raw, budget: 10_000 })).toMatchObject({ firstSummary: 0, segments: [[0, 9]], tokens: 3700 });
    // 1000 of summaries + the newest messages that fit in 1000 from a valid cut: wrap-up + request.
    expect(planContext({ summaries: sums, raw, budget: 2000 })).toMatchObject({ firstSummary: 0, segments: [[7, 9]], tokens: 1200 });
    // Both summaries and the request do not fit in 700: the oldest summary goes.
    expect(planContext({ summaries: sums, raw, budget: 700 })).toMatchObject({ firstSummary: 1, segments: [[7, 9]], tokens: 700 });
    // Not even one summary fits next to the request.
    expect(planContext({ summaries: sums, raw, budget: 300 })).toMatchObject({ firstSummary: 2, segments: [[7, 9]], tokens: 200 });
  });

  it("squeezes an oversized latest turn to its request and the newest exchanges that fit", () => {
    const messages = buildHistory([{ user: 100, exchanges: [1, 2, 3].map(() => ({ assistant: 100, results: [4000] })), wrapUp: null }], null);
    const plan = planContext({ summaries: [{ tokenCount: 100 }], raw: messages.map(meta), budget: 9000 });
    const kept = included(messages, plan.segments);
    expect(kept[0].role).toBe(Role.ROLE_USER);
    expect(kept.map((m) => m.id)).toEqual([messages[0].id, ...messages.slice(3).map((m) => m.id)]);
    expect(plan.tokens).toBe(100 + 2 * 4100);
    expect(toolPairViolations(kept)).toEqual([]);
  });

  it("says so when the latest user message alone is over the budget", () => {
    const messages = buildHistory([], 5000);
    const plan = planContext({ summaries: [], raw: messages.map(meta), budget: 1000 });
    expect(plan.overflow).toBe(true);
    expect(plan.segments).toEqual([[0, 1]]);
  });
});

describe("condensation and budgets", () => {
  it("condenses the oldest run of `fanout` roots of the lowest depth", () => {
    const roots = [2, 1, 1, 1, 0, 0, 0, 0].map((depth, i) => ({ depth, i }));
    expect(condensableRun(roots, 4)?.map((r) => r.i)).toEqual([4, 5, 6, 7]);
    expect(condensableRun(roots, 3)?.map((r) => r.i)).toEqual([4, 5, 6]);
    expect(condensableRun(roots.slice(0, 7), 4)).toBeUndefined();
    expect(condensableRun([], 2)).toBeUndefined();
  });

  it("aims at token_budget − reserve, but never below min(8000, budget / 2)", () => {
    expect(promptBudget(32_000, 16_384)).toBe(15_616);
    expect(promptBudget(200_000, 16_384)).toBe(183_616);
    expect(promptBudget(12_000, 16_384)).toBe(6_000);
    expect(promptBudget(20_000, 16_384)).toBe(8_000);
    expect(promptBudget(1_000, 0)).toBe(1_000);
  });
});
