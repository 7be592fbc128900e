import { Message, type TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { EntryRevision } from "./types.js";
import { checkMessageInput, decodeEntry, encodeEntry, type EntryKind } from "./rows.js";
import { entryIndexText } from "./search-text.js";

// The rows of a message rewrite (SessionService.RewriteMessages): the entry it replaces, the UPDATE
// it runs, and the revision it keeps in entry_revisions. Both stores use them.

/** An entry looked up by id for a rewrite. */
export interface RewriteTargetRow {
  seq: number;
  kind: EntryKind;
  token_count: number;
  payload: Buffer;
}

/** The parameters of the entries UPDATE a rewrite runs. */
export interface EntryUpdateRow {
  session_id: string;
  seq: number;
  role: number;
  token_count: number;
  payload: Uint8Array;
  /** The search index's text of the new revision (search-text.ts); not a column of entries. */
  index_text: string;
}

/** A replaced revision of an entry (entry_revisions). */
export interface RevisionRow {
  session_id: string;
  entry_id: string;
  revision: number;
  token_count: number;
  replaced_at_ms: number;
  reason: string;
  payload: Uint8Array;
}

/**
 * The next revision of a message entry: `input` replaces the message, which keeps the entry's id
 * (as `message.id`), the new `tokenCount` and the entry's timestamp; the entry keeps its id, seq,
 * parent id and timestamp, and its revision goes up by one.
 */
export function rewrittenEntryRow(
  sessionId: string,
  seq: number,
  previous: TranscriptEntry,
  input: Message,
  tokenCount: number,
  what: string,
): { row: EntryUpdateRow; entry: TranscriptEntry } {
  checkMessageInput(input, tokenCount, what);
  const message: Message = {
    ...Message.fromPartial({}),
    ...input,
    id: previous.id,
    tokenCount,
    timestampMs: previous.timestampMs,
  };
  const entry: TranscriptEntry = {
    ...previous,
    entry: { $case: "message", value: message },
    revision: (previous.revision ?? 0) + 1,
  };
  const row: EntryUpdateRow = {
    session_id: sessionId,
    seq,
    role: message.role,
    token_count: tokenCount,
    payload: encodeEntry(entry, what),
    index_text: entryIndexText(entry),
  };
  return { row, entry };
}

export function toEntryRevision(row: Pick<RevisionRow, "payload" | "replaced_at_ms" | "reason">): EntryRevision {
  return { entry: decodeEntry(row.payload), replacedAtMs: row.replaced_at_ms, reason: row.reason };
}
