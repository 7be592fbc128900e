import { randomBytes } from "node:crypto";

import type Database from "better-sqlite3";

import { InvalidArgumentError } from "../../contract/errors.js";
import { CompactionEntry, Message, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { SessionLabels, SessionRecord, ViewMessage } from "../types.js";

// The SQL side of the SQLite store: row shapes, prepared statements, and row <-> entry mapping.

/** A host-assigned entry id: 16 lowercase hex characters (64 random bits). */
export function newEntryId(): string {
  return randomBytes(8).toString("hex");
}

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
  payload: Uint8Array;
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
  return { entryId: entry.id, seq: row.seq, tokenCount: row.token_count, message };
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

function encode(entry: TranscriptEntry, what: string): Uint8Array {
  try {
    return TranscriptEntry.encode(entry).finish();
  } catch (err) {
    throw new InvalidArgumentError(`${what} cannot be encoded: ${(err as Error).message}`);
  }
}

/**
 * Builds the stored form of a message entry: the message gets the entry id, its token count and
 * a timestamp (its own when set, else `nowMs`).
 */
export function messageEntryRow(
  pos: Position,
  id: string,
  input: Message,
  tokenCount: number,
  nowMs: number,
  what: string,
): { row: EntryRow; entry: TranscriptEntry } {
  checkTokenCount(tokenCount, `${what}: token count`);
  if (!input || typeof input !== "object") throw new InvalidArgumentError(`${what}: message is missing`);
  const timestampMs = input.timestampMs ? input.timestampMs : nowMs;
  const message: Message = { ...Message.fromPartial({}), ...input, id, tokenCount, timestampMs };
  const entry: TranscriptEntry = {
    id,
    parentId: pos.parentId,
    seq: pos.seq,
    timestampMs,
    entry: { $case: "message", value: message },
    revision: 0,
  };
  const row: EntryRow = {
    session_id: pos.sessionId,
    seq: pos.seq,
    id,
    parent_id: pos.parentId,
    kind: "message",
    role: message.role,
    token_count: tokenCount,
    timestamp_ms: timestampMs,
    payload: encode(entry, what),
  };
  return { row, entry };
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
  const entry: TranscriptEntry = {
    id,
    parentId: pos.parentId,
    seq: pos.seq,
    timestampMs: nowMs,
    entry: { $case: "compaction", value: { ...CompactionEntry.fromPartial({}), ...compaction } },
    revision: 0,
  };
  const row: EntryRow = {
    session_id: pos.sessionId,
    seq: pos.seq,
    id,
    parent_id: pos.parentId,
    kind: "compaction",
    role: null,
    token_count: summaryTokens,
    timestamp_ms: nowMs,
    payload: encode(entry, what),
  };
  return { row, entry };
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
  };
}

export type Statements = ReturnType<typeof prepareStatements>;

/** Every statement the store runs, prepared once per connection. */
export function prepareStatements(db: Database.Database) {
  return {
    session: db.prepare<[string], SessionRow>("SELECT * FROM sessions WHERE session_id = ?"),
    insertSession: db.prepare(
      `INSERT INTO sessions (session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms)
       VALUES (@session_id, @session_key, @agent_id, @parent_session_id, @created_at_ms, @updated_at_ms)`,
    ),
    saveSession: db.prepare(
      `UPDATE sessions SET updated_at_ms = @updated_at_ms, entry_count = @entry_count,
         message_count = @message_count, compaction_count = @compaction_count,
         total_tokens = @total_tokens, last_seq = @last_seq, last_entry_id = @last_entry_id,
         latest_compaction_id = @latest_compaction_id, latest_compaction_seq = @latest_compaction_seq,
         active_from_seq = @active_from_seq, active_summary_tokens = @active_summary_tokens
       WHERE session_id = @session_id`,
    ),
    insertEntry: db.prepare<[EntryRow], void>(
      `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, payload)
       VALUES (@session_id, @seq, @id, @parent_id, @kind, @role, @token_count, @timestamp_ms, @payload)`,
    ),
    entryById: db.prepare<[string, string], { seq: number; kind: string }>(
      "SELECT seq, kind FROM entries WHERE session_id = ? AND id = ?",
    ),
    entryBySeq: db.prepare<[string, number], PayloadRow>(
      "SELECT seq, token_count, payload FROM entries WHERE session_id = ? AND seq = ?",
    ),
    activeMessages: db.prepare<[string, number], PayloadRow>(
      `SELECT seq, token_count, payload FROM entries
       WHERE session_id = ? AND seq >= ? AND kind = 'message' ORDER BY seq`,
    ),
    entriesAfter: db.prepare<[string, number, number], { payload: Buffer }>(
      "SELECT payload FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    ),
    listFirst: db.prepare<[number], SessionRow>(
      "SELECT * FROM sessions ORDER BY updated_at_ms DESC, session_id ASC LIMIT ?",
    ),
    listAfter: db.prepare<[{ u: number; s: string; n: number }], SessionRow>(
      `SELECT * FROM sessions
       WHERE updated_at_ms <= @u AND (updated_at_ms < @u OR session_id > @s)
       ORDER BY updated_at_ms DESC, session_id ASC LIMIT @n`,
    ),
    deleteEntries: db.prepare<[string], void>("DELETE FROM entries WHERE session_id = ?"),
    deleteSession: db.prepare<[string], void>("DELETE FROM sessions WHERE session_id = ?"),
    setSystemAdditionTokens: db.prepare<[number, string], void>(
      "UPDATE sessions SET system_addition_tokens = ? WHERE session_id = ?",
    ),
  };
}
