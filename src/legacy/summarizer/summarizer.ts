import type { Message } from "../../contract/gen/contextd/v1/types.js";

export interface SummarizeInput {
  /** The summary of the previous compaction, to be folded into the new one; empty when none. */
  previousSummary: string;
  /** The messages being compacted away, oldest first (never the previous summary message). */
  messages: Message[];
  /** Hard cap on the summary's length in characters. */
  maxChars: number;
  /** The runtime's instructions for this compaction (e.g. "focus on the database migration"). */
  customInstructions?: string;
  signal?: AbortSignal;
}

/** Turns older history plus the previous summary into one new summary. */
export interface Summarizer {
  readonly kind: string;
  summarize(input: SummarizeInput): Promise<string>;
}
