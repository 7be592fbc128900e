import type { EntryRow, SessionRow } from "../rows.js";
import { entryIndexText } from "../search-text.js";

// The rows of the PostgreSQL store. They have the same columns as the SQLite store's, so the stored
// forms of sessions and entries are built by the same functions (../rows.ts and
// ../rewrite-rows.ts, re-exported here): one definition of how a message becomes an entry,
// whatever the database, which is what keeps the two stores' answers identical. What differs is
// only how values cross the driver: int8 columns arrive as numbers (pool-config.ts), `hidden` is a
// boolean, bytea arrives as a Buffer and is sent as one, and batches of entries travel as parallel
// arrays (unnest).

export {
  checkTokenCount,
  compactionEntryRow,
  decodeEntry,
  importedEntryRow,
  messageEntryRow,
  newEntryId,
  newSessionRow,
  noteMessageEntry,
  toSessionRecord,
  toViewMessage,
  type EntryKind,
  type EntryRow,
  type IdempotencyRow,
  type PayloadRow,
  type SessionRow,
} from "../rows.js";
export { rewrittenEntryRow, toEntryRevision, type RevisionRow, type RewriteTargetRow } from "../rewrite-rows.js";

/** A Uint8Array as the Buffer the driver sends as bytea (no copy). */
export function bytea(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The parameters of insertEntries ($2…$12; $12 the words the search column is made of) for `rows`, all of one session ($1). */
export function entryArrays(rows: readonly EntryRow[]): unknown[] {
  return [
    rows.map((r) => r.seq),
    rows.map((r) => r.id),
    rows.map((r) => r.parent_id),
    rows.map((r) => r.kind),
    rows.map((r) => r.role),
    rows.map((r) => r.token_count),
    rows.map((r) => r.timestamp_ms),
    rows.map((r) => r.hidden === 1),
    rows.map((r) => r.message_key),
    rows.map((r) => bytea(r.payload)),
    rows.map((r) => entryIndexText(r.entry)),
  ];
}

/** The parameters of saveSession for `row`, in the statement's order. */
export function sessionParams(row: SessionRow): unknown[] {
  return [
    row.session_id,
    row.updated_at_ms,
    row.entry_count,
    row.message_count,
    row.compaction_count,
    row.total_tokens,
    row.last_seq,
    row.last_entry_id,
    row.latest_compaction_id,
    row.latest_compaction_seq,
    row.active_from_seq,
    row.active_summary_tokens,
    row.last_message_key,
    row.last_message_timestamp_ms,
  ];
}

/** The parameters of insertSession for `row`. */
export function newSessionParams(row: SessionRow): unknown[] {
  return [row.session_id, row.session_key, row.agent_id, row.parent_session_id, row.created_at_ms, row.updated_at_ms, row.header_json];
}

/**
 * A session row read through `row_to_json` (the view statements return it that way, once, beside
 * the entries): JSON numbers are already numbers, so it is a SessionRow as it stands.
 */
export function sessionFromJson(json: string): SessionRow {
  return JSON.parse(json) as SessionRow;
}

/** Entries per INSERT when many are written at once (imports, copies): bounds one statement's size. */
export const ENTRY_CHUNK = 500;

export function chunks<T>(items: readonly T[], size = ENTRY_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
