import { randomFillSync } from "node:crypto";

import { entryMessageBytes, rememberEncoding, rememberedBody } from "../contract/encoded-messages.js";
import { InvalidArgumentError } from "../contract/errors.js";
import { entryPayloadWithBody } from "../contract/received-messages.js";
import { CompactionEntry, Message, TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { SessionLabels, SessionRecord, ViewMessage } from "./types.js";

// The transcript rows of the SQLite store (sessions, entries, entry revisions) and their mapping to
// and from the contract's entries. Registry rows are in registry-rows.ts, rewrite rows in
// rewrite-rows.ts, the SQL in statements.ts.
//
// newEntryId stays here: test/unit/store/sqlite/sqlite-store.test.ts mocks this module to force colliding ids,
// so every caller must import it from rows.js for the mock to reach it.

/** Random bytes for ids, drawn 4 KiB at a time: a call into the CSPRNG per entry cost more than the id. */
const idBytes = Buffer.alloc(4096);
let idPos = idBytes.length;

/** A host-assigned entry id: 16 lowercase hex characters (64 random bits). */
export function newEntryId(): string {
  if (idPos === idBytes.length) {
    randomFillSync(idBytes);
    idPos = 0;
  }
  idPos += 8;
  return idBytes.toString("hex", idPos - 8, idPos);
}

/** The `kind` column: RuntimeEntry rows are stored as 'custom' (neither is ever part of the active view). */
export type EntryKind = "message" | "compaction" | "custom";

export interface SessionRow {
  session_id: string;
  session_key: string;
  agent_id: string;
  parent_session_id: string;
  created_at_ms: number;
  updated_at_ms: number;
  entry_count: number;
  message_count: number;
  compaction_count: number;
  total_tokens: number;
  last_seq: number;
  last_entry_id: string;
  latest_compaction_id: string;
  latest_compaction_seq: number;
  active_from_seq: number;
  active_summary_tokens: number;
  system_addition_tokens: number;
  header_json: string;
  /** The message_key of the newest keyed message entry ('' when none), and the newest message's timestamp (migration 6). */
  last_message_key: string;
  last_message_timestamp_ms: number;
  /** Bytes of the session's entries and revisions (migration 12), kept by triggers; absent from a row built in memory. */
  stored_bytes?: number | string;
  /** SQLite only (migration 8): the session's number in the search index's rowids (sqlite/search.ts). */
  search_id?: number | null;
}

/** The subagent TTL columns of a session row (migration 4). */
export interface SubagentStateRow {
  expires_at_ms: number;
  ended_at_ms: number;
  end_reason: number;
}

/** A child session whose TTL passed, as the sweep reads it. */
export interface ExpiredRow {
  session_id: string;
  session_key: string;
  agent_id: string;
  parent_session_id: string;
  expires_at_ms: number;
}

/** A time in ms the store keeps (a TTL's end, an end's time): a safe non-negative integer. */
export function checkTimeMs(ms: number, what: string): void {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new InvalidArgumentError(`${what} must be a non-negative integer of milliseconds, got ${String(ms)}`);
}

/** The parameters of the entries INSERT statement. */
export interface EntryRow {
  session_id: string;
  seq: number;
  id: string;
  parent_id: string;
  kind: EntryKind;
  role: number | null;
  token_count: number;
  timestamp_ms: number;
  hidden: 0 | 1;
  /** AppendMessagesRequest.message_keys (migration 6); null for an entry without one. */
  message_key: string | null;
  payload: Uint8Array;
  /**
   * The entry itself (not a column): what the PostgreSQL store's search column is made of
   * (search-text.ts entryIndexText, cut in the append's transaction there; the SQLite store's indexer
   * reads the payload afterwards, search-index.ts).
   */
  entry: TranscriptEntry;
}

/** Advances the session's newest-message columns past a message entry it now holds (in memory). */
export function noteMessageEntry(row: SessionRow, entry: Pick<EntryRow, "kind" | "timestamp_ms" | "message_key">): void {
  if (entry.kind !== "message") return;
  row.last_message_timestamp_ms = entry.timestamp_ms;
  if (entry.message_key) row.last_message_key = entry.message_key;
}

export interface PayloadRow {
  seq: number;
  token_count: number;
  payload: Buffer;
}

export function toSessionRecord(row: SessionRow): SessionRecord {
  return {
    sessionId: row.session_id,
    sessionKey: row.session_key,
    agentId: row.agent_id,
    parentSessionId: row.parent_session_id,
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
    entryCount: row.entry_count,
    messageCount: row.message_count,
    compactionCount: row.compaction_count,
    totalTokens: row.total_tokens,
    lastSeq: row.last_seq,
    latestCompactionId: row.latest_compaction_id,
    systemAdditionTokens: row.system_addition_tokens,
    headerJson: row.header_json,
    lastMessageKey: row.last_message_key,
    lastMessageTimestampMs: row.last_message_timestamp_ms,
    // Kept by the store's triggers (migration 12); a row built in memory has none yet.
    storedBytes: Number(row.stored_bytes ?? 0),
  };
}

export function decodeEntry(payload: Uint8Array): TranscriptEntry {
  return TranscriptEntry.decode(payload);
}

export function toViewMessage(row: PayloadRow): ViewMessage {
  const entry = decodeEntry(row.payload);
  if (entry.entry?.$case !== "message") {
    throw new Error(`entry seq ${row.seq} is not a message entry`);
  }
  const message = entry.entry.value;
  message.id = entry.id;
  message.tokenCount = row.token_count;
  const body = entryMessageBytes(row.payload);
  return { entryId: entry.id, seq: row.seq, tokenCount: row.token_count, message: body ? rememberEncoding(message, body) : message };
}

/** Where a new entry goes: the session's next seq and the id of the entry before it. */
export interface Position {
  sessionId: string;
  seq: number;
  parentId: string;
}

export function checkTokenCount(tokens: number, what: string): number {
  if (!Number.isSafeInteger(tokens) || tokens < 0 || tokens > 0xffffffff) {
    throw new InvalidArgumentError(`${what} must be a non-negative integer, got ${String(tokens)}`);
  }
  return tokens;
}

/** An entry's stored bytes; an entry protobuf cannot encode is the caller's INVALID_ARGUMENT. */
export function encodeEntry(entry: TranscriptEntry, what: string): Uint8Array {
  try {
    return TranscriptEntry.encode(entry).finish();
  } catch (err) {
    throw new InvalidArgumentError(`${what} cannot be encoded: ${(err as Error).message}`);
  }
}

/** What a message entry is refused for before it is built: no message, or a token count out of range. */
export function checkMessageInput(input: Message | undefined, tokenCount: number, what: string): asserts input is Message {
  checkTokenCount(tokenCount, `${what}: token count`);
  if (!input || typeof input !== "object") throw new InvalidArgumentError(`${what}: message is missing`);
}

/**
 * Builds the stored form of a message entry: the message gets the entry id, its token count and
 * a timestamp (its own when set, else `nowMs`); the entry gets the runtime's `messageKey` ("" for none).
 */
export function messageEntryRow(
  pos: Position,
  id: string,
  input: Message,
  tokenCount: number,
  nowMs: number,
  what: string,
  messageKey = "",
): { row: EntryRow; entry: TranscriptEntry } {
  checkMessageInput(input, tokenCount, what);
  const timestampMs = input.timestampMs ? input.timestampMs : nowMs;
  const body = rememberedBody(input);
  if (body) {
    // A message as the runtime sent it (received-messages.ts): its bytes go into the payload as they
    // are, followed by the fields set here; the decoded message is complete, so no copy fills defaults.
    const head = TranscriptEntry.fromPartial({ id, parentId: pos.parentId, seq: pos.seq, timestampMs, hidden: input.excludeFromContext, messageKey });
    const built = entryPayloadWithBody(TranscriptEntry.encode(head).finish(), body, {
      id,
      tokenCount,
      timestampMs: input.timestampMs ? undefined : timestampMs,
    });
    const message = rememberEncoding({ ...input, id, tokenCount, timestampMs }, built.message);
    const entry: TranscriptEntry = { ...head, entry: { $case: "message", value: message } };
    return { row: { ...entryRowFields(pos, entry, "message", message.role, tokenCount), payload: built.payload }, entry };
  }
  const message: Message = { ...Message.fromPartial({}), ...input, id, tokenCount, timestampMs };
  const entry = TranscriptEntry.fromPartial({
    id,
    parentId: pos.parentId,
    seq: pos.seq,
    timestampMs,
    entry: { $case: "message", value: message },
    hidden: message.excludeFromContext,
    messageKey,
  });
  return { row: entryRow(pos, entry, "message", message.role, tokenCount, what), entry };
}

/**
 * Builds the stored form of an imported entry: it keeps its id, parent id, timestamp, runtime
 * fields and `hidden` flag as given; a message gets the entry id and its token count.
 */
export function importedEntryRow(
  pos: Pick<Position, "sessionId" | "seq">,
  input: TranscriptEntry,
  tokenCount: number,
  what: string,
): { row: EntryRow; entry: TranscriptEntry } {
  checkTokenCount(tokenCount, `${what}: token count`);
  const entry = TranscriptEntry.fromPartial({ ...input, seq: pos.seq, revision: 0 });
  const e = entry.entry;
  if (!e) throw new InvalidArgumentError(`${what}: the entry has no kind (message, compaction, custom or runtime)`);
  if (e.$case === "message") e.value = { ...e.value, id: entry.id, tokenCount };
  const kind: EntryKind = e.$case === "message" ? "message" : e.$case === "compaction" ? "compaction" : "custom";
  return { row: entryRow({ ...pos, parentId: entry.parentId }, entry, kind, e.$case === "message" ? e.value.role : null, tokenCount, what), entry };
}

function entryRow(pos: Position, entry: TranscriptEntry, kind: EntryKind, role: number | null, tokenCount: number, what: string): EntryRow {
  return { ...entryRowFields(pos, entry, kind, role, tokenCount), payload: encodeEntry(entry, what) };
}

function entryRowFields(pos: Position, entry: TranscriptEntry, kind: EntryKind, role: number | null, tokenCount: number): Omit<EntryRow, "payload"> {
  return {
    entry,
    session_id: pos.sessionId,
    seq: pos.seq,
    id: entry.id,
    parent_id: pos.parentId,
    kind,
    role,
    token_count: tokenCount,
    timestamp_ms: entry.timestampMs,
    hidden: entry.hidden ? 1 : 0,
    message_key: kind === "message" && entry.messageKey ? entry.messageKey : null,
  };
}

/** Builds the stored form of a compaction entry; `summaryTokens` goes in its token_count. */
export function compactionEntryRow(
  pos: Position,
  id: string,
  compaction: CompactionEntry,
  summaryTokens: number,
  nowMs: number,
  what: string,
): { row: EntryRow; entry: TranscriptEntry } {
  checkTokenCount(summaryTokens, `${what}: summary tokens`);
  const entry = TranscriptEntry.fromPartial({
    id,
    parentId: pos.parentId,
    seq: pos.seq,
    timestampMs: nowMs,
    entry: { $case: "compaction", value: { ...CompactionEntry.fromPartial({}), ...compaction } },
  });
  return { row: entryRow(pos, entry, "compaction", null, summaryTokens, what), entry };
}

/** A new session's row, before any entry. */
export function newSessionRow(sessionId: string, labels: SessionLabels | undefined, now: number): SessionRow {
  return {
    session_id: sessionId,
    session_key: labels?.sessionKey ?? "",
    agent_id: labels?.agentId ?? "",
    parent_session_id: labels?.parentSessionId ?? "",
    created_at_ms: now,
    updated_at_ms: now,
    entry_count: 0,
    message_count: 0,
    compaction_count: 0,
    total_tokens: 0,
    last_seq: 0,
    last_entry_id: "",
    latest_compaction_id: "",
    latest_compaction_seq: 0,
    active_from_seq: 1,
    active_summary_tokens: 0,
    system_addition_tokens: 0,
    header_json: "",
    last_message_key: "",
    last_message_timestamp_ms: 0,
  };
}

/** A row of idempotency_keys. */
export interface IdempotencyRow {
  session_id: string;
  idempotency_key: string;
  request_hash: string;
  entry_ids: string;
  token_counts: string;
  created_at_ms: number;
}
