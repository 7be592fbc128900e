/**
 * How summaries reach the model, and the host.
 *
 * A summary is shown as a user message whose first line says what it is and exactly which stored
 * messages it stands for, so the model (and a human reading the context) can tell a summary from
 * the conversation and knows the originals still exist:
 *
 *   [lossless summary S12 · depth 1 · covers messages 3f9a0c1d2e4b5a69…8b21d4f0a7c3e512 (40 messages, 31204 tokens)]
 *   # Conversation summary (contextd extractive v1)
 *   …
 *
 * Entry ids are the host's, so `contextctl` / GetTranscript can find the originals. The same
 * metadata is attached to the message (`lossless.*` keys) for programs.
 */
import { Role, textMessage, type Message } from "contextd/engine-sdk";
import type { SummaryRecord } from "./types.js";

export const SUMMARY_ID_KEY = "lossless.summary_id";
export const SUMMARY_DEPTH_KEY = "lossless.depth";
export const SUMMARY_FIRST_KEY = "lossless.first_entry_id";
export const SUMMARY_LAST_KEY = "lossless.last_entry_id";

type Header = Pick<SummaryRecord, "id" | "depth" | "firstEntryId" | "lastEntryId" | "messageCount" | "sourceTokens">;

/** The first line of a rendered summary. */
export function summaryHeader(s: Header): string {
  const span = s.firstEntryId === s.lastEntryId ? s.firstEntryId : `${s.firstEntryId}…${s.lastEntryId}`;
  const plural = s.messageCount === 1 ? "message" : "messages";
  return `[lossless summary ${s.id} · depth ${s.depth} · covers messages ${span} (${s.messageCount} ${plural}, ${s.sourceTokens} tokens)]`;
}

export function summaryText(s: Header & Pick<SummaryRecord, "text">): string {
  return `${summaryHeader(s)}\n${s.text}`;
}

/** The summary as the user message the model sees; `tokenCount` is the stored count. */
export function summaryMessage(s: SummaryRecord): Message {
  return textMessage(Role.ROLE_USER, summaryText(s), {
    tokenCount: s.tokenCount,
    timestampMs: s.createdAtMs,
    metadata: {
      [SUMMARY_ID_KEY]: s.id,
      [SUMMARY_DEPTH_KEY]: String(s.depth),
      [SUMMARY_FIRST_KEY]: s.firstEntryId,
      [SUMMARY_LAST_KEY]: s.lastEntryId,
    },
  });
}

/** Is this one of our rendered summaries (e.g. echoed back by a runtime)? */
export function isLosslessSummary(message: Message): boolean {
  return Boolean(message.metadata?.[SUMMARY_ID_KEY]);
}

/**
 * The summary text committed to the host's transcript by Compact: every root, oldest first, each
 * with its header. The host wraps it in its own "the earlier conversation was compacted" message,
 * and the legacy engine serves it should this engine be unavailable.
 */
export function hostSummary(roots: readonly SummaryRecord[]): string {
  return roots.map(summaryText).join("\n\n");
}
