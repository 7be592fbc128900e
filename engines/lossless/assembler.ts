/**
 * Fitting a session into a token budget: which summaries and which raw messages the model sees.
 *
 * The context is the root summaries, oldest first, followed by the fresh tail. Precedence when it
 * does not all fit (compaction has normally made it fit already, see compactor.ts):
 *   1. the minimal tail — the latest user message and what follows it — always;
 *   2. then as many root summaries as fit next to it, dropping the *oldest* first;
 *   3. then raw messages, newest first, in the room that is left, starting at a valid cut so no
 *      tool result appears without its call and no call without its result.
 * If the minimal tail alone is over the budget, the latest user message is kept and the newest
 * complete tool exchanges after it that fit; if that message alone is over the budget, the plan
 * says `overflow` (the engine then answers PREASSEMBLY_MAY_OVERFLOW, an honest "cannot fit").
 *
 * Pure: works on token counts and tool-pair fields only; the engine turns the plan into messages.
 */
import { Role } from "contextd/engine-sdk";
import { minimalTailStart, suffixTokens, type ChunkingMessage } from "./chunking.js";
import { validStarts } from "./tool-pairs.js";

export interface PlanInput {
  /** Root summaries, oldest first. */
  summaries: ReadonlyArray<{ tokenCount: number }>;
  /** Raw (unsummarized) messages, oldest first. */
  raw: readonly ChunkingMessage[];
  /** The budget the answer must fit; Infinity when the caller set none. */
  budget: number;
}

export interface ContextPlan {
  /** summaries[firstSummary..] are included (the older ones were dropped). */
  firstSummary: number;
  /** Raw index ranges [start, end) included, oldest first. */
  segments: Array<[number, number]>;
  /** Tokens of everything included. */
  tokens: number;
  /** Even the latest user message alone does not fit the budget. */
  overflow: boolean;
}

export function planContext({ summaries, raw, budget }: PlanInput): ContextPlan {
  const n = raw.length;
  const suffix = suffixTokens(raw);
  const summaryTokens = summaries.map((s) => s.tokenCount);
  const allSummaries = summaryTokens.reduce((a, b) => a + b, 0);
  if (allSummaries + suffix[0] <= budget) {
    return { firstSummary: 0, segments: n > 0 ? [[0, n]] : [], tokens: allSummaries + suffix[0], overflow: false };
  }
  const starts = validStarts(raw);
  const minStart = minimalTailStart(raw, starts);
  if (suffix[minStart] > budget) return squeezeLatestTurn(raw, starts, suffix, minStart, budget, summaries.length);

  // Drop the oldest summaries until the rest fits next to the minimal tail.
  let first = 0;
  let kept = allSummaries;
  while (first < summaries.length && kept + suffix[minStart] > budget) kept -= summaryTokens[first++];
  // Fill the room that is left with the newest raw messages, from a valid cut.
  const room = budget - kept;
  let start = minStart;
  for (let t = minStart - 1; t >= 0; t--) {
    if (suffix[t] > room) break;
    if (starts[t]) start = t;
  }
  return { firstSummary: first, segments: [[start, n]], tokens: kept + suffix[start], overflow: false };
}

/** The latest turn alone is over the budget: keep its user message and the newest exchanges that fit. */
function squeezeLatestTurn(
  raw: readonly ChunkingMessage[],
  starts: readonly boolean[],
  suffix: readonly number[],
  minStart: number,
  budget: number,
  summaryCount: number,
): ContextPlan {
  const n = raw.length;
  const none = summaryCount; // no summary fits next to an oversized turn
  const head = raw[minStart];
  if (head.role === Role.ROLE_USER) {
    if (head.tokenCount > budget) return { firstSummary: none, segments: [[minStart, minStart + 1]], tokens: head.tokenCount, overflow: true };
    let from = n;
    for (let s = n - 1; s > minStart; s--) {
      if (head.tokenCount + suffix[s] > budget) break;
      if (starts[s]) from = s;
    }
    const segments: Array<[number, number]> = [[minStart, minStart + 1]];
    if (from < n) segments.push([from, n]);
    return { firstSummary: none, segments, tokens: head.tokenCount + suffix[from], overflow: false };
  }
  // No user message at all: the newest complete exchanges that fit, or the last one if none does.
  for (let s = minStart + 1; s < n; s++) {
    if (starts[s] && suffix[s] <= budget) return { firstSummary: none, segments: [[s, n]], tokens: suffix[s], overflow: false };
  }
  let last = n - 1;
  while (last > 0 && !starts[last]) last--;
  return { firstSummary: none, segments: [[last, n]], tokens: suffix[last], overflow: suffix[last] > budget };
}
