import type { Message } from "../../contract/gen/contextd/v1/types.js";

export interface SummarizeInput {
  /** The summary of the previous compaction, to be folded into the new one; empty when none. */
  previousSummary: string;
  /** The messages being compacted away, oldest first (never the previous summary message). */
  messages: Message[];
  /** Hard cap on the summary's length in characters. */
  maxChars: number;
  /** The session's agent: a model's requests count against its spend limit (model-spend.ts). */
  agentId?: string;
  /** The runtime's instructions for this compaction (e.g. "focus on the database migration"). */
  customInstructions?: string;
  signal?: AbortSignal;
  /**
   * Runs a wait outside contextd (a model request): the caller's tenant gives its turn at doing
   * work up meanwhile (src/contract/tenant-limits.ts). Absent: the wait is run as is.
   */
  away?: <T>(work: () => Promise<T>) => Promise<T>;
  /**
   * What this summarizer reported for its previous call in the same compaction, if any. Native
   * compaction may summarize several times (later cuts, smaller caps); a summarizer whose model
   * already failed once in this compaction uses it to fall back at once instead of waiting for
   * the model again.
   */
  priorAttempt?: SummaryDetails;
}

/** Flat, JSON-safe facts about one summarize call; they end up in the compaction entry's `details`. */
export type SummaryDetails = Record<string, string | number | boolean>;

/** A summary together with what produced it. */
export interface SummaryResult {
  summary: string;
  /**
   * Merged into the compaction's `details`. By convention `summarizer` names the summarizer that
   * actually wrote the summary (it may differ from the configured one after a fallback), and
   * `summarizer_fallback_from` / `summarizer_fallback_reason` say which one failed and why.
   */
  details?: SummaryDetails;
}

/**
 * Turns older history plus the previous summary into one new summary. A plain string is the
 * summary with nothing more to report (the compaction records `summarizer: kind`); a summarizer
 * with more to say (a model, a fallback) answers a SummaryResult.
 */
export interface Summarizer {
  readonly kind: string;
  summarize(input: SummarizeInput): Promise<string | SummaryResult>;
}

/** A summarizer that never has more to report than the text (e.g. the deterministic `extractive`). */
export interface TextSummarizer extends Summarizer {
  summarize(input: SummarizeInput): Promise<string>;
}

/** Either answer of `Summarizer.summarize`, as a SummaryResult. */
export function asSummaryResult(answer: string | SummaryResult): SummaryResult {
  return typeof answer === "string" ? { summary: answer } : answer;
}
