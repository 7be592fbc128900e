import { InvalidArgumentError } from "../../contract/errors.js";
import { isSummaryMessage, summaryOf } from "../../contract/messages.js";
import {
  CompactionTarget,
  type CompactionResult,
  type Message,
} from "../../contract/gen/contextd/v1/types.js";
import type { Tokenizer } from "../../tokens/tokenizer.js";
import { asSummaryResult, type Summarizer, type SummaryDetails } from "../summarizer/summarizer.js";
import { analyzeCutPoints, chooseCut, suffixSums, type Cut } from "./cut-points.js";
import { promptBudget } from "./prompt-budget.js";
import { capChars, charsPerToken, summaryTokens, truncateSummaryToFit } from "./summary-fit.js";

export { promptBudget } from "./prompt-budget.js";

/**
 * The host's native compaction (SPEC §4), used by the built-in `legacy` engine and by
 * HostService.DelegateCompaction. Pure: it reads an active view and returns the compaction to
 * commit; the caller appends the compaction entry.
 *
 * Algorithm:
 * 1. No-ops: BUDGET and the view already fits the prompt budget; THRESHOLD and the view (or the
 *    part after the previous summary) is within keep_recent_tokens; no message after the previous
 *    summary (unless, under BUDGET, that summary alone is over the budget). `force` skips all but
 *    the last: a forced compaction with at least one message always compacts.
 * 2. Keep budget: THRESHOLD → keep_recent_tokens; BUDGET → min(keep_recent_tokens, prompt budget −
 *    an estimate of the new summary's size).
 * 3. Cut at the earliest cut point whose kept tail fits (turn boundaries first, then intra-turn,
 *    else keep nothing); at least one message is always summarized (a cut at index 0 would
 *    summarize nothing). Summarize everything before the cut together with the previous summary;
 *    the summary is hard-capped at summaryMaxChars even if the summarizer overshoots.
 * 4. BUDGET only: while summary + tail exceed the prompt budget, move the cut later using the
 *    summary's real size and re-summarize (at most MAX_CUT_ITERATIONS times); then, as the last
 *    resort, keep nothing and ask for shorter summaries, finally truncating the summary itself.
 *    Cuts only move forward and every loop is bounded, so it converges even when the most recent
 *    turn alone is larger than the budget.
 *
 * Kept messages are never re-tokenized: their stored `tokenCount` is summed (O(n) per iteration).
 */

export interface CompactionSettings {
  /** Tokens set aside for the model's answer (BUDGET target). */
  reserveTokens: number;
  /** Recent tokens kept verbatim. */
  keepRecentTokens: number;
  /** Hard cap on the summary's length in characters. */
  summaryMaxChars: number;
}

export interface NativeCompactionInput {
  /**
   * The active view, oldest first. messages[0] may be the previous summary (isSummaryMessage);
   * every other message has `id` (entry id) and `tokenCount` set.
   */
  messages: Message[];
  /** The model's context window budget for this call; > 0. */
  tokenBudget: number;
  /** UNSPECIFIED/BUDGET (fit `tokenBudget − reserveTokens`) or THRESHOLD (keep `keepRecentTokens`). */
  target: CompactionTarget;
  /** Compact even when the view already fits (there must still be something to summarize). */
  force: boolean;
  customInstructions?: string;
  /** The runtime's own count of the view; 0/undefined → the sum of the messages' tokenCount. */
  currentTokenCount?: number;
  signal?: AbortSignal;
}

export interface NativeCompactionOutcome {
  compacted: boolean;
  /** Why nothing was done, or a one-line account of what was. */
  reason: string;
  result?: CompactionResult;
}

export interface NativeCompactionDeps {
  summarizer: Summarizer;
  tokenizer: Tokenizer;
  settings: CompactionSettings;
}

/** Summaries tried with later and later cuts before falling back to keeping nothing. */
export const MAX_CUT_ITERATIONS = 4;
/** Summaries tried with smaller and smaller character caps once nothing is kept. */
export const MAX_SHRINK_ITERATIONS = 3;
/** Chars per token assumed for the summary before one has been written (prose, o200k/heuristic). */
const ESTIMATED_CHARS_PER_TOKEN = 4;
/** Safety margin applied when turning a token target into a character cap. */
const SHRINK_MARGIN = 0.9;

export async function compactNative(
  input: NativeCompactionInput,
  deps: NativeCompactionDeps,
): Promise<NativeCompactionOutcome> {
  const { summarizer, tokenizer, settings } = deps;
  const { signal } = input;
  if (!(Number.isFinite(input.tokenBudget) && input.tokenBudget > 0)) {
    throw new InvalidArgumentError(`token_budget must be > 0 (got ${input.tokenBudget})`);
  }
  throwIfAborted(signal);

  const hasPrevious = input.messages.length > 0 && isSummaryMessage(input.messages[0]);
  const previousSummary = hasPrevious ? summaryOf(input.messages[0]) : "";
  const previousTokens = hasPrevious ? storedTokens(input.messages[0], tokenizer) : 0;
  const rest = hasPrevious ? input.messages.slice(1) : input.messages;
  const n = rest.length;
  const suffix = suffixSums(rest.map((m) => storedTokens(m, tokenizer)));
  const total = previousTokens + suffix[0];
  const tokensBefore = input.currentTokenCount && input.currentTokenCount > 0 ? input.currentTokenCount : total;

  const threshold = input.target === CompactionTarget.COMPACTION_TARGET_THRESHOLD;
  const budget = promptBudget(input.tokenBudget, settings.reserveTokens);
  const keepRecent = Math.max(0, settings.keepRecentTokens);
  const maxChars = Math.max(0, Math.floor(settings.summaryMaxChars));

  if (!input.force) {
    if (!threshold && tokensBefore <= budget) {
      return noop(`within budget: ${tokensBefore} of ${budget} tokens`);
    }
    if (threshold && tokensBefore <= keepRecent) {
      return noop(`below threshold: ${tokensBefore} of ${keepRecent} keep_recent_tokens`);
    }
    if (threshold && n > 0 && suffix[0] <= keepRecent) {
      return noop(
        `nothing to compact: the ${suffix[0]} tokens after the previous summary fit keep_recent_tokens (${keepRecent})`,
      );
    }
  }
  // With no message to fold in, re-summarizing the previous summary only makes sense to fit a budget.
  const summaryOnlyOverBudget = n === 0 && hasPrevious && !threshold && total > budget;
  if (n === 0 && !summaryOnlyOverBudget) {
    return noop(hasPrevious ? "nothing to compact: only the previous summary is active" : "nothing to compact: the view is empty");
  }

  let iterations = 0;
  let summary = "";
  // What the summarizer said about its latest call: that call wrote the summary that is committed.
  let reported: SummaryDetails | undefined;
  const summarize = async (cutIndex: number, chars: number): Promise<string> => {
    throwIfAborted(signal);
    iterations++;
    const answer = asSummaryResult(
      await summarizer.summarize({
        previousSummary,
        messages: rest.slice(0, cutIndex),
        maxChars: chars,
        customInstructions: input.customInstructions,
        signal,
        priorAttempt: reported,
      }),
    );
    throwIfAborted(signal);
    reported = answer.details;
    return capChars(answer.summary, chars);
  };
  const finish = (cut: Cut): NativeCompactionOutcome => {
    const tokensAfter = summaryTokens(summary, tokenizer) + suffix[cut.index];
    const result: CompactionResult = {
      summary,
      firstKeptEntryId: cut.index < n ? rest[cut.index].id : "",
      tokensBefore,
      tokensAfter,
      details: {
        summarizer: summarizer.kind,
        // The summarizer's own account (e.g. `summarizer: extractive` after an openai fallback) wins.
        ...reported,
        summarized_messages: cut.index,
        kept_messages: n - cut.index,
        cut: cut.kind,
        iterations,
        target: threshold ? "threshold" : "budget",
        prompt_budget: budget,
      },
    };
    const reason =
      `compacted ${cut.index} message(s) into a summary, kept ${n - cut.index} ` +
      `(${tokensBefore} → ${tokensAfter} tokens)`;
    return { compacted: true, reason, result };
  };

  const kinds = analyzeCutPoints(rest);

  if (threshold) {
    const cut = chooseCut(kinds, suffix, keepRecent);
    summary = await summarize(cut.index, maxChars);
    return finish(cut);
  }

  // BUDGET: estimate the summary, then correct the cut with its real size.
  const emptySummaryTokens = summaryTokens("", tokenizer);
  const allowance = Math.min(
    emptySummaryTokens + Math.ceil(maxChars / ESTIMATED_CHARS_PER_TOKEN),
    Math.floor(budget / 2),
  );
  let cut = chooseCut(kinds, suffix, Math.min(keepRecent, budget - allowance));
  for (let i = 0; i < MAX_CUT_ITERATIONS; i++) {
    summary = await summarize(cut.index, maxChars);
    const written = summaryTokens(summary, tokenizer);
    if (written + suffix[cut.index] <= budget) return finish(cut);
    if (cut.index === n) break;
    cut = chooseCut(kinds, suffix, budget - written, cut.index + 1);
  }

  // Last resort: keep nothing and make the summary itself fit.
  cut = { index: n, kind: "none" };
  const available = budget - emptySummaryTokens;
  let chars = Math.min(maxChars, Math.floor(available * charsPerToken(summary, tokenizer) * SHRINK_MARGIN));
  for (let i = 0; i < MAX_SHRINK_ITERATIONS && chars > 0; i++) {
    summary = await summarize(n, chars);
    const written = summaryTokens(summary, tokenizer);
    if (written <= budget) return finish(cut);
    const ratio = available / Math.max(1, written - emptySummaryTokens);
    chars = Math.min(chars - 1, Math.floor(Math.min(chars, summary.length) * ratio * SHRINK_MARGIN));
  }
  summary = truncateSummaryToFit(summary, budget, tokenizer);
  return finish(cut);
}

/** The stored count; counted here only when the host left it unset (never for a normal entry). */
function storedTokens(message: Message, tokenizer: Tokenizer): number {
  return message.tokenCount > 0 ? message.tokenCount : tokenizer.countMessage(message);
}

function noop(reason: string): NativeCompactionOutcome {
  return { compacted: false, reason };
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (!signal?.aborted) return;
  const reason: unknown = signal.reason;
  const error = new Error(reason instanceof Error && reason.message ? reason.message : "compaction aborted", {
    cause: reason,
  });
  error.name = "AbortError";
  throw error;
}
