/**
 * The two things the lossless engine stores, as plain data.
 *
 * A session's history is a sequence of messages (in host order, `ord` 1, 2, 3, …) plus a DAG of
 * summaries over it. A *leaf* summary covers a contiguous run of messages; a *condensed* summary
 * covers `fanout` consecutive summaries of the depth below. Summaries that nothing has condensed
 * yet are the *roots*: read oldest first they partition the summarized prefix of the history, and
 * everything after the newest leaf is still raw (the fresh tail). Nothing is ever deleted: a root
 * points at its children, a leaf at its messages, and every message stays stored verbatim.
 */
import type { Role } from "contextd/engine-sdk";

/** What compaction and assembly need to know about a stored message, without its content. */
export interface MessageMeta {
  /** The host's entry id. */
  entryId: string;
  /** Position in the session's history (1-based, gap-free among stored messages). */
  ord: number;
  role: Role;
  /** The host's token count (our own count when the host sent none). */
  tokenCount: number;
  /** Ids of the tool calls an assistant message makes. */
  toolCallIds: readonly string[];
  /** For a tool result: the call it answers. */
  toolCallId: string;
}

/** One node of the summary DAG. */
export interface SummaryRecord {
  sessionId: string;
  /** `S1`, `S2`, … in creation order, per session. */
  id: string;
  /** 0 for a leaf (covers messages), d+1 for a summary that condensed summaries of depth d. */
  depth: number;
  /** The span of messages covered, as ords and as host entry ids (inclusive). */
  firstOrd: number;
  lastOrd: number;
  firstEntryId: string;
  lastEntryId: string;
  /**
   * How many messages the summary stands for, and their host token counts summed: the span's
   * messages less its system messages, which are never summarized (pinned.ts).
   */
  messageCount: number;
  sourceTokens: number;
  /** The summaries this one condensed, oldest first; empty for a leaf. */
  childIds: string[];
  /** The summary that condensed this one; null while it is a root. */
  parentId: string | null;
  /** The summary text (without the header line added when it is rendered as a message). */
  text: string;
  /** Tokens of the rendered summary message (header included). */
  tokenCount: number;
  /** Which summarizer wrote it: `extractive` or `host-model`. */
  summarizer: string;
  createdAtMs: number;
}

/** A summary before it is stored: the store assigns `id` and the rendering decides `tokenCount`. */
export type SummaryDraft = Omit<SummaryRecord, "id" | "tokenCount" | "parentId" | "createdAtMs">;

export function sumTokens(items: ReadonlyArray<{ tokenCount: number }>): number {
  let total = 0;
  for (const item of items) total += item.tokenCount;
  return total;
}
