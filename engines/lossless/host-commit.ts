/**
 * Turning the engine's compaction into the answer the host commits (Compact's `result`).
 *
 * The host keeps its own transcript and active view. When it commits our result, its view becomes
 * "summary + the messages from first_kept_entry_id on" — what the legacy engine serves if this
 * engine is ever unavailable. So the result must describe the same split as our DAG:
 * - `summary`: every root summary, oldest first, rendered with its header (render.ts);
 * - `first_kept_entry_id`: our first raw message that is not a system message (pinned.ts), which
 *   must be a message of the request's active view after its summary (the host validates it). If the host's view starts *later* than our raw tail (it compacted
 *   on its own while we were away), leaves are added first until our tail starts inside its view —
 *   but never into the latest user turn; if that is not enough, nothing is committed.
 * - commit only when it helps: new summaries were made, or the host's view still holds messages
 *   our summaries already cover.
 */
import { summaryMessage as hostSummaryMessage, type CompactionResult, type Message } from "contextd/engine-sdk";
import type { Tokenizer } from "../../src/tokens/index.js";
import type { CompactReport, Compactor } from "./compactor.js";
import { isSystem } from "./pinned.js";
import { hostSummary } from "./render.js";
import type { LosslessStore } from "./store.js";
import type { SummarizeCall } from "./summarizer.js";
import { sumTokens } from "./types.js";

export interface CommitAnswer {
  compacted: boolean;
  reason: string;
  result?: CompactionResult;
}

export interface CommitInput {
  sessionId: string;
  /**
   * The request's active view after the host's summary (pinned.ts hostKeptPart), conversation
   * messages only, oldest first.
   */
  view: readonly Message[];
  /** Tokens of the host's pinned system messages heading its view (before its summary). */
  hostPinnedTokens: number;
  /** The host's count of its view before compaction. */
  tokensBefore: number;
  report: CompactReport;
  /** What the compaction aimed at: a token target, or "threshold". */
  target: number | "threshold";
  call: SummarizeCall;
}

export async function answerForHost(store: LosslessStore, compactor: Compactor, tokenizer: Tokenizer, input: CommitInput): Promise<CommitAnswer> {
  const { sessionId, view, report, call } = input;
  let leaves = report.leafSummaries;
  let condensed = report.condensedSummaries;

  const viewStart = view.length > 0 ? store.ordOf(sessionId, view[0].id) : undefined;
  if (viewStart !== undefined && (store.rawMessages(sessionId)[0]?.ord ?? Infinity) < viewStart) {
    const aligned = await compactor.summarizeBefore(sessionId, viewStart, call);
    leaves += aligned.leaves;
    condensed += aligned.condensed;
  }

  const roots = store.roots(sessionId);
  const raw = store.rawMessages(sessionId);
  const made = `${leaves} leaf and ${condensed} condensed summaries made`;
  // System messages never start the host's kept part: before it they are pinned at the head of the
  // host's view anyway (docs/pinned-messages.md), and the host may have pinned them already.
  const firstRaw = raw.find((m) => !isSystem(m));
  if (roots.length === 0 || !firstRaw) return { compacted: false, reason: `nothing to compact (${made})` };
  const firstKept = firstRaw.entryId;
  const keptAt = view.findIndex((m) => m.id === firstKept);
  if (keptAt < 0) {
    return {
      compacted: false,
      reason: `${made}; not committed: the host's active view does not contain this engine's first fresh-tail message ${firstKept}`,
    };
  }
  const frontier = store.frontier(sessionId);
  const hostBehind = view.some((m) => !isSystem(m) && (store.ordOf(sessionId, m.id) ?? Infinity) <= frontier);
  const size = compactor.size(sessionId, raw);
  if (leaves + condensed === 0 && !hostBehind) {
    return {
      compacted: false,
      reason: `already compact: ${size} tokens${input.target === "threshold" ? "" : ` ≤ target ${input.target}`}, and the host's view matches`,
    };
  }

  const summary = hostSummary(roots);
  // The host's view after the commit: its pinned messages, the system messages before the cut
  // (pinned from then on), the summary, the kept part.
  const pinnedAfter = input.hostPinnedTokens + sumTokens(view.slice(0, keptAt).filter(isSystem));
  const tokensAfter = tokenizer.countMessage(hostSummaryMessage(summary)) + pinnedAfter + sumTokens(view.slice(keptAt));
  const stats = store.stats(sessionId);
  const depth = roots.reduce((d, s) => Math.max(d, s.depth), 0);
  return {
    compacted: true,
    reason:
      `${made}; ${roots.length} top-level summaries (depth ≤ ${depth}) + ${raw.length} fresh messages = ${size} tokens` +
      (input.target === "threshold" ? "" : ` (target ${input.target})`),
    result: {
      summary,
      firstKeptEntryId: firstKept,
      tokensBefore: input.tokensBefore,
      tokensAfter,
      details: {
        engine: "lossless",
        leaf_summaries: leaves,
        condensed_summaries: condensed,
        depth,
        top_level_summaries: roots.length,
        summaries_total: stats.summaries,
        stored_messages: stats.messages,
        summarized_messages: stats.summarizedMessages,
        fresh_tail_messages: raw.length,
        fresh_tail_tokens: sumTokens(raw),
        protected_tokens: report.protectedTokens,
        assembled_tokens: size,
        target: input.target,
        stopped: report.stopped,
        summarizers: [...new Set(roots.map((s) => s.summarizer))].join(","),
      },
    },
  };
}
