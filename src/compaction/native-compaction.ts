import { fieldError } from "../contract/errors.js";
import { summaryMessage } from "../contract/messages.js";
import { CompactionTarget, type CompactionResult, type Message } from "../contract/gen/contextd/v1/types.js";
import type { CountOptions, Tokenizer } from "../tokens/tokenizer.js";
import { asSummaryResult, type SummarizeInput, type Summarizer, type SummaryDetails } from "./summarizer/summarizer.js";
import { analyzeCutPoints, chooseCut, chooseFillingCut, type Cut } from "./cut-points.js";
import { latestUserIndex, requestQuote, withRequest } from "./latest-request.js";
import { promptBudget } from "../contract/prompt-budget.js";
import { budgetSummaryChars, capChars, charsPerToken, summaryTokens, truncateSummaryToFit } from "./summary-fit.js";
import { carriesContent } from "./summary-content.js";
import { foldable, viewParts } from "./view-parts.js";

export { promptBudget } from "../contract/prompt-budget.js";

/**
 * The host's native compaction (docs/concepts.md, "Compaction"), used by the built-in `legacy`
 * engine and by HostService.DelegateCompaction. Pure: it reads an active view and returns the
 * compaction to commit; the caller appends the compaction entry.
 *
 * Algorithm:
 * 1. No-ops: BUDGET and the view already fits the prompt budget; THRESHOLD and the view (or the
 *    part after the previous summary) is within keep_recent_tokens; no message after the previous
 *    summary (unless, under BUDGET, that summary alone is over the budget). `force` skips all but
 *    the last: a forced compaction with at least one message always compacts.
 * 2. Keep budget: THRESHOLD → keep_recent_tokens; BUDGET → min(keep_recent_tokens, prompt budget −
 *    an estimate of the new summary's size). Under BUDGET the summary is capped at about half of the
 *    prompt budget (budgetSummaryChars) besides summaryMaxChars, so that both fit.
 * 3. Cut: THRESHOLD → the earliest turn boundary whose kept tail fits (then intra-turn, else keep
 *    nothing; chooseCut). BUDGET → the cut that keeps the most — at a tool-pair boundary inside a
 *    turn if need be — unless a turn boundary keeps nearly as much (chooseFillingCut): the
 *    assembled context should use the prompt budget (≥ 80 % of it when the history holds that
 *    much: bench `budget_utilization`), not stop at the last turn boundary, which in an agent's
 *    session of few user turns with dozens of tool calls each is often just the latest user
 *    message. At least one message is always summarized (a cut at index 0 would summarize
 *    nothing). Summarize everything before the cut together with the previous summary; the
 *    summary is hard-capped at its character cap even if the summarizer overshoots. When the cut
 *    falls after the latest user message, that message is quoted verbatim in the summary unless
 *    the summarizer kept it (latest-request.ts).
 * 4. BUDGET only: with the summary's real size, move the cut — later while summary + tail exceed
 *    the prompt budget, earlier while a larger tail would fit next to it — re-summarizing each time
 *    (at most MAX_CUT_ITERATIONS summaries; the largest tail that fitted wins). When nothing fits,
 *    or only the summary does, keep nothing and let the summary use the whole prompt budget (ask for
 *    shorter summaries, finally truncating the summary itself). Every loop is bounded, so it
 *    converges even when the most recent turn alone is larger than the budget.
 *
 * Kept messages are never re-tokenized: their stored `tokenCount` is summed (O(n) per iteration).
 *
 * 5. Never a summary that says nothing: a compaction is proposed only with a summary that carries
 *    content from what it replaces (summary-content.ts) and, under BUDGET, only when the summary
 *    and the kept tail fit the prompt budget. When the budget cannot hold a useful summary — the
 *    summary message's own wrapper plus MIN_SUMMARY_TOKENS — or the summarizer wrote nothing
 *    usable, the compaction is *refused*: `compacted: false`, `refused: true`, and a reason that
 *    says why (the legacy engine answers `ok: false`). At small caps the extractive summarizer
 *    writes a compact form with the identifiers and the latest request first.
 *
 * Pinned system messages (docs/pinned-messages.md, view-parts.ts): no system message is ever
 * handed to the summarizer, and all of them — those heading the view and those among its entries
 * — are a fixed cost: the targets above (the prompt budget, keep_recent_tokens) are what they
 * leave, and "at least one message summarized" means one that is not a system message. When the
 * pinned messages leave no room for a useful summary the compaction is refused (item 5), and the
 * host's contract takes over (PREASSEMBLY_MAY_OVERFLOW).
 */

export interface CompactionSettings {
  /** Tokens set aside for the model's answer (BUDGET target). */
  reserveTokens: number;
  /** Recent tokens kept verbatim. */
  keepRecentTokens: number;
  /** Hard cap on the summary's length in characters. */
  summaryMaxChars: number;
  /**
   * Auto-compaction before Assemble also compacts a view at this fraction of the budget or more,
   * when the runtime's telemetry says the prompt cache is cold (host/cold-cache.ts); 0 or unset: off.
   */
  coldCacheCompactRatio?: number;
}

export interface NativeCompactionInput {
  /**
   * The active view as the host builds it (host/active-view.ts): the pinned system messages, the
   * previous summary (isSummaryMessage) when there is one, then the kept entries. Every message
   * other than the summary has `id` (entry id) and `tokenCount` set.
   */
  messages: Message[];
  /** The model's context window budget for this call; > 0. */
  tokenBudget: number;
  /** UNSPECIFIED/BUDGET (fit `tokenBudget − reserveTokens`) or THRESHOLD (keep `keepRecentTokens`). */
  target: CompactionTarget;
  /** Compact even when the view already fits (there must still be something to summarize). */
  force: boolean;
  customInstructions?: string;
  /** The session's agent, whose spend limit a summarizer model's requests count against. */
  agentId?: string;
  /** The runtime's own count of the view; 0/undefined → the sum of the messages' tokenCount. */
  currentTokenCount?: number;
  signal?: AbortSignal;
  /** Runs the summarizer's waits outside contextd (SummarizeInput.away). */
  away?: SummarizeInput["away"];
  /** Whom the summaries' counting is for, on the counting threads (src/tokens/count-pool.ts). */
  counting?: CountOptions;
}

export interface NativeCompactionOutcome {
  compacted: boolean;
  /**
   * Compaction was asked for but cannot be done well: the budget cannot hold a useful summary, or
   * the summarizer wrote nothing of what it would replace. Unlike a no-op (the view already fits,
   * nothing to compact), a failure for the caller: the legacy engine answers `ok: false`.
   */
  refused?: boolean;
  /** Why nothing was done, or a one-line account of what was. */
  reason: string;
  result?: CompactionResult;
}

export interface NativeCompactionDeps {
  summarizer: Summarizer;
  tokenizer: Tokenizer;
  settings: CompactionSettings;
}

/** Summaries tried with other cuts (later to fit, earlier to fill) before falling back to keeping nothing. */
export const MAX_CUT_ITERATIONS = 5;
/** Summaries tried with smaller and smaller character caps once nothing is kept. */
export const MAX_SHRINK_ITERATIONS = 3;
/** Chars per token assumed for the summary before one has been written (prose, o200k/heuristic). */
const ESTIMATED_CHARS_PER_TOKEN = 4;
/** Safety margin applied when turning a token target into a character cap. */
const SHRINK_MARGIN = 0.9;
/**
 * The fewest tokens of summary, besides the summary message's own wrapper, a BUDGET compaction
 * commits: room for an identifier or two, or a few words of the latest request.
 */
export const MIN_SUMMARY_TOKENS = 8;

export async function compactNative(input: NativeCompactionInput, deps: NativeCompactionDeps): Promise<NativeCompactionOutcome> {
  const { summarizer, tokenizer, settings } = deps;
  const { signal } = input;
  if (!(Number.isFinite(input.tokenBudget) && input.tokenBudget > 0)) {
    throw fieldError("token_budget", `must be > 0 (got ${input.tokenBudget})`);
  }
  throwIfAborted(signal);

  const { hasPrevious, previousSummary, previousTokens, rest, suffix, pinnedTokens, pinnedMessages, foldableCount, firstCut } = viewParts(
    input.messages,
    tokenizer,
  );
  const n = rest.length;
  const total = pinnedTokens + previousTokens + suffix[0];
  // Whether to compact is decided on the runtime's count when it gives one (it sees the whole prompt:
  // system prompt, tool schemas); what is recorded is the view before and after, both counted by the
  // host, so tokens_before and tokens_after measure the same thing (the runtime's count goes in details).
  const runtimeCount = input.currentTokenCount && input.currentTokenCount > 0 ? input.currentTokenCount : undefined;
  const observed = runtimeCount ?? total;
  const tokensBefore = total;

  const threshold = input.target === CompactionTarget.COMPACTION_TARGET_THRESHOLD;
  const budget = promptBudget(input.tokenBudget, settings.reserveTokens);
  // Pinned system messages are a fixed cost: the summary and the kept tail share what they leave.
  const room = budget - pinnedTokens;
  const keepRecentSetting = Math.max(0, settings.keepRecentTokens);
  const keepRecent = Math.max(0, keepRecentSetting - pinnedTokens);
  const maxChars = Math.max(0, Math.floor(settings.summaryMaxChars));

  if (!input.force) {
    if (!threshold && observed <= budget) {
      return noop(`within budget: ${observed} of ${budget} tokens`);
    }
    if (threshold && observed <= keepRecentSetting) {
      return noop(`below threshold: ${observed} of ${keepRecentSetting} keep_recent_tokens`);
    }
    if (threshold && foldableCount > 0 && suffix[0] <= keepRecent) {
      return noop(
        `nothing to compact: the ${suffix[0] + pinnedTokens} tokens after the previous summary fit keep_recent_tokens (${keepRecentSetting})` +
          (pinnedTokens > 0 ? `, ${pinnedTokens} of them pinned system messages` : ""),
      );
    }
  }
  // With no message to fold in, re-summarizing the previous summary only makes sense to fit a budget.
  const summaryOnlyOverBudget = foldableCount === 0 && hasPrevious && !threshold && total > budget;
  if (foldableCount === 0 && !summaryOnlyOverBudget) {
    if (hasPrevious)
      return noop(
        "nothing to compact: only the previous summary is active" + (pinnedMessages > 0 ? " (and pinned system messages, which are never summarized)" : ""),
      );
    return noop(
      pinnedMessages > 0 ? "nothing to compact: the view holds only system messages, which are never summarized" : "nothing to compact: the view is empty",
    );
  }

  let iterations = 0;
  let summary = "";
  // What the summarizer said about its latest call: that call wrote the summary that is committed.
  let reported: SummaryDetails | undefined;
  // Whether the committed summary had the latest user request appended (latest-request.ts).
  let quoted = false;
  const latest = latestUserIndex(rest);
  const summarize = async (cutIndex: number, chars: number): Promise<string> => {
    throwIfAborted(signal);
    iterations++;
    const quote = latest >= 0 && latest < cutIndex ? requestQuote(rest[latest], chars) : "";
    const answer = asSummaryResult(
      await summarizer.summarize({
        previousSummary,
        messages: foldable(rest, cutIndex),
        maxChars: chars - quote.length,
        customInstructions: input.customInstructions,
        agentId: input.agentId,
        signal,
        away: input.away,
        priorAttempt: reported,
      }),
    );
    throwIfAborted(signal);
    reported = answer.details;
    const written = quote
      ? withRequest(capChars(answer.summary, chars - quote.length), rest[latest], quote)
      : { summary: capChars(answer.summary, chars), quoted: false };
    quoted = written.quoted;
    return written.summary;
  };
  // A summary of ~16k characters is ~10–20 ms of BPE: counted off the event loop, once per text.
  const summaryCounts = new Map<string, number>();
  const countSummary = async (text: string): Promise<number> => {
    let counted = summaryCounts.get(text);
    if (counted === undefined) {
      [counted] = await tokenizer.countMessages([summaryMessage(text)], input.counting ?? {});
      summaryCounts.set(text, counted);
    }
    return counted;
  };
  const finish = async (cut: Cut): Promise<NativeCompactionOutcome> => {
    const tokensAfter = (await countSummary(summary)) + suffix[cut.index] + pinnedTokens;
    const summarized = foldable(rest, cut.index).length;
    const kept = foldableCount - summarized;
    const result: CompactionResult = {
      summary,
      firstKeptEntryId: cut.index < n ? rest[cut.index].id : "",
      tokensBefore,
      tokensAfter,
      details: {
        summarizer: summarizer.kind,
        // The summarizer's own account (e.g. `summarizer: extractive` after an openai fallback) wins.
        ...reported,
        summarized_messages: summarized,
        kept_messages: kept,
        cut: cut.kind,
        iterations,
        target: threshold ? "threshold" : "budget",
        prompt_budget: budget,
        ...(quoted ? { latest_request_quoted: true } : {}),
        ...(runtimeCount !== undefined ? { runtime_token_count: runtimeCount } : {}),
        ...(pinnedMessages > 0 ? { pinned_messages: pinnedMessages, pinned_tokens: pinnedTokens } : {}),
      },
    };
    if (!(await useful(summary, cut.index))) {
      return refuse(
        `the summary the ${reported?.summarizer ?? summarizer.kind} summarizer wrote (${summary.length} characters) holds nothing of the ` +
          `${summarized} message(s)${hasPrevious ? " and the previous summary" : ""} it would replace`,
      );
    }
    if (!threshold && tokensAfter > budget) {
      return refuse(`the summary and the kept messages (${tokensAfter} tokens) do not fit the prompt budget of ${budget} tokens`);
    }
    const reason =
      `compacted ${summarized} message(s) into a summary, kept ${kept}` +
      (pinnedMessages > 0 ? ` and ${pinnedMessages} pinned system message(s)` : "") +
      ` (${tokensBefore} → ${tokensAfter} tokens)`;
    return { compacted: true, reason, result };
  };
  // Whether `text`, as the summary of everything before rest[cutIndex], says anything of it.
  const useful = (text: string, cutIndex: number) => carriesContent(text, previousSummary, foldable(rest, cutIndex));

  const kinds = analyzeCutPoints(rest);

  if (threshold) {
    const cut = chooseCut(kinds, suffix, keepRecent, firstCut);
    summary = await summarize(cut.index, maxChars);
    return finish(cut);
  }

  const emptySummaryTokens = summaryTokens("", tokenizer);
  if (room - emptySummaryTokens < MIN_SUMMARY_TOKENS) {
    // Not even a few words of summary fit next to its wrapper (and the pinned system messages):
    // the summarizer is not asked, nothing is proposed.
    return refuse(
      `a prompt budget of ${budget} tokens cannot hold a useful summary: the summary message alone takes ${emptySummaryTokens}` +
        (pinnedTokens > 0 ? ` and the pinned system messages ${pinnedTokens}` : "") +
        `, which leaves ${Math.max(0, room - emptySummaryTokens)} of the ${MIN_SUMMARY_TOKENS} tokens a summary needs at least`,
    );
  }

  // BUDGET: estimate the summary, then correct the cut with its real size — later to fit, earlier to
  // fill. The largest tail that fitted next to its own useful summary wins. The summary gets about
  // half the room, but never less than MIN_SUMMARY_TOKENS' worth of characters.
  const fillChars = Math.max(
    budgetSummaryChars(maxChars, room, emptySummaryTokens, ESTIMATED_CHARS_PER_TOKEN),
    Math.min(maxChars, MIN_SUMMARY_TOKENS * ESTIMATED_CHARS_PER_TOKEN),
  );
  const allowance = emptySummaryTokens + Math.ceil(fillChars / ESTIMATED_CHARS_PER_TOKEN);
  const fill = (keep: number, from: number) => chooseFillingCut(kinds, suffix, Math.min(keepRecent, keep), from);
  let cut = fill(room - allowance, firstCut);
  let fit: { cut: Cut; summary: string; reported: SummaryDetails | undefined; quoted: boolean } | undefined;
  const tried = new Set<number>();
  for (let i = 0; i < MAX_CUT_ITERATIONS; i++) {
    tried.add(cut.index);
    summary = await summarize(cut.index, fillChars);
    const written = await countSummary(summary);
    if (written + suffix[cut.index] <= room && (await useful(summary, cut.index))) {
      fit = { cut, summary, reported, quoted };
      const wider = fill(room - written, firstCut);
      if (wider.index >= cut.index || tried.has(wider.index)) break;
      cut = wider;
      continue;
    }
    if (fit || cut.index === n) break;
    cut = fill(room - written, cut.index + 1);
  }
  // A fit that keeps a tail is committed; one that keeps nothing lets the summary have the whole room.
  if (fit && (fit.cut.index < n || fillChars >= maxChars)) {
    ({ summary, reported, quoted } = fit);
    return finish(fit.cut);
  }

  // Last resort: keep nothing and make the summary itself fit.
  cut = { index: n, kind: "none" };
  const available = room - emptySummaryTokens;
  let chars = Math.min(maxChars, Math.floor(available * charsPerToken(summary, tokenizer) * SHRINK_MARGIN));
  for (let i = 0; i < MAX_SHRINK_ITERATIONS && chars > 0; i++) {
    summary = await summarize(n, chars);
    const written = await countSummary(summary);
    if (written <= room) return finish(cut);
    const ratio = available / Math.max(1, written - emptySummaryTokens);
    chars = Math.min(chars - 1, Math.floor(Math.min(chars, summary.length) * ratio * SHRINK_MARGIN));
  }
  summary = truncateSummaryToFit(summary, room, tokenizer);
  return finish(cut);
}

function noop(reason: string): NativeCompactionOutcome {
  return { compacted: false, reason };
}

function refuse(why: string): NativeCompactionOutcome {
  return { compacted: false, refused: true, reason: `refused: ${why}` };
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
