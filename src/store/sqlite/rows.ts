import { randomBytes } from "node:crypto";

import type Database from "better-sqlite3";

import { InvalidArgumentError } from "../../contract/errors.js";
import { EngineInfo } from "../../contract/gen/contextd/v1/engine.js";
import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import { CompactionEntry, Message, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { StoredRegistration } from "../registry-store.js";
import type { EntryRevision, SessionLabels, SessionRecord, ViewMessage } from "../types.js";

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
  checkTokenCount(tokenCount, `${what}: token count`);
  if (!input || typeof input !== "object") throw new InvalidArgumentError(`${what}: message is missing`);
  const message: Message = {
    ...Message.fromPartial({}),
    ...input,
    id: previous.id,
    tokenCount,
    timestampMs: previous.timestampMs,
  };
  const entry: TranscriptEntry = {
    id: previous.id,
    parentId: previous.parentId,
    seq: previous.seq,
    timestampMs: previous.timestampMs,
    entry: { $case: "message", value: message },
    revision: (previous.revision ?? 0) + 1,
  };
  const row: EntryUpdateRow = {
    session_id: sessionId,
    seq,
    role: message.role,
    token_count: tokenCount,
    payload: encode(entry, what),
  };
  return { row, entry };
}

export function toEntryRevision(row: Pick<RevisionRow, "payload" | "replaced_at_ms" | "reason">): EntryRevision {
  return { entry: decodeEntry(row.payload), replacedAtMs: row.replaced_at_ms, reason: row.reason };
}

/** A row of engine_registrations. */
export interface RegistrationRow {
  engine_id: string;
  owner: string;
  endpoint: string;
  info: Uint8Array;
  protocol_version: number;
  registered_at_ms: number;
}

export function registrationRow(r: StoredRegistration): RegistrationRow {
  if (!r || typeof r !== "object") throw new InvalidArgumentError("registration is missing");
  if (typeof r.engineId !== "string" || r.engineId === "") {
    throw new InvalidArgumentError("registration: engine id is required");
  }
  const what = `registration of engine ${r.engineId}`;
  if (typeof r.owner !== "string" || r.owner.trim() === "") throw new InvalidArgumentError(`${what}: owner is required`);
  checkInteger(r.protocolVersion, `${what}: protocol version`);
  checkInteger(r.registeredAtMs, `${what}: registered_at_ms`);
  let info: Uint8Array;
  try {
    info = EngineInfo.encode(EngineInfo.fromPartial(r.info ?? {})).finish();
  } catch (err) {
    throw new InvalidArgumentError(`${what}: engine info cannot be encoded: ${(err as Error).message}`);
  }
  return {
    engine_id: r.engineId,
    owner: r.owner,
    endpoint: r.endpoint ?? "",
    info,
    protocol_version: r.protocolVersion,
    registered_at_ms: r.registeredAtMs,
  };
}

export function toStoredRegistration(row: RegistrationRow): StoredRegistration {
  return {
    engineId: row.engine_id,
    owner: row.owner,
    endpoint: row.endpoint,
    info: EngineInfo.decode(row.info),
    protocolVersion: row.protocol_version,
    registeredAtMs: row.registered_at_ms,
  };
}

/** A row of engine_quarantines. */
export interface QuarantineRow {
  engine_id: string;
  payload: Uint8Array;
  updated_at_ms: number;
}

export function quarantineRow(engineId: string, q: QuarantineState, nowMs: number): QuarantineRow {
  if (typeof engineId !== "string" || engineId === "") throw new InvalidArgumentError("quarantine: engine id is required");
  if (!q || typeof q !== "object") throw new InvalidArgumentError(`quarantine of engine ${engineId}: state is missing`);
  let payload: Uint8Array;
  try {
    payload = QuarantineState.encode(QuarantineState.fromPartial(q)).finish();
  } catch (err) {
    throw new InvalidArgumentError(`quarantine of engine ${engineId} cannot be encoded: ${(err as Error).message}`);
  }
  return { engine_id: engineId, payload, updated_at_ms: nowMs };
}

function checkInteger(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(`${what} must be a non-negative integer, got ${String(n)}`);
  }
}

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

/** Every statement the store runs, prepared once per connection (named, so declarations can be emitted). */
export interface Statements {
  session: Stmt<[string], SessionRow>;
  insertSession: Stmt<[SessionRow], void>;
  saveSession: Stmt<[SessionRow], void>;
  insertEntry: Stmt<[EntryRow], void>;
  entryById: Stmt<[string, string], { seq: number; kind: string }>;
  entryBySeq: Stmt<[string, number], PayloadRow>;
  activeMessages: Stmt<[string, number], PayloadRow>;
  entriesAfter: Stmt<[string, number, number], { payload: Buffer }>;
  listFirst: Stmt<[number], SessionRow>;
  listAfter: Stmt<[{ u: number; s: string; n: number }], SessionRow>;
  deleteRevisions: Stmt<[string], void>;
  deleteEntries: Stmt<[string], void>;
  deleteSession: Stmt<[string], void>;
  setSystemAdditionTokens: Stmt<[number, string], void>;
  // rewrites
  rewriteTarget: Stmt<[string, string], RewriteTargetRow>;
  updateEntry: Stmt<[EntryUpdateRow], void>;
  insertRevision: Stmt<[RevisionRow], void>;
  revisions: Stmt<[string, string], Pick<RevisionRow, "payload" | "replaced_at_ms" | "reason">>;
  // registry
  saveRegistration: Stmt<[RegistrationRow], void>;
  deleteRegistration: Stmt<[string], void>;
  listRegistrations: Stmt<[], RegistrationRow>;
  saveQuarantine: Stmt<[QuarantineRow], void>;
  clearQuarantine: Stmt<[string], void>;
  listQuarantines: Stmt<[], QuarantineRow>;
}

/** Every statement the store runs, prepared once per connection. */
export function prepareStatements(db: Database.Database): Statements {
  return {
    session: db.prepare<[string], SessionRow>("SELECT * FROM sessions WHERE session_id = ?"),
    insertSession: db.prepare<[SessionRow], void>(
      `INSERT INTO sessions (session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms)
       VALUES (@session_id, @session_key, @agent_id, @parent_session_id, @created_at_ms, @updated_at_ms)`,
    ),
    saveSession: db.prepare<[SessionRow], void>(
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
    deleteRevisions: db.prepare<[string], void>("DELETE FROM entry_revisions WHERE session_id = ?"),
    deleteEntries: db.prepare<[string], void>("DELETE FROM entries WHERE session_id = ?"),
    deleteSession: db.prepare<[string], void>("DELETE FROM sessions WHERE session_id = ?"),
    setSystemAdditionTokens: db.prepare<[number, string], void>(
      "UPDATE sessions SET system_addition_tokens = ? WHERE session_id = ?",
    ),
    rewriteTarget: db.prepare<[string, string], RewriteTargetRow>(
      "SELECT seq, kind, token_count, payload FROM entries WHERE session_id = ? AND id = ?",
    ),
    updateEntry: db.prepare<[EntryUpdateRow], void>(
      `UPDATE entries SET role = @role, token_count = @token_count, payload = @payload
       WHERE session_id = @session_id AND seq = @seq`,
    ),
    insertRevision: db.prepare<[RevisionRow], void>(
      `INSERT INTO entry_revisions (session_id, entry_id, revision, token_count, replaced_at_ms, reason, payload)
       VALUES (@session_id, @entry_id, @revision, @token_count, @replaced_at_ms, @reason, @payload)`,
    ),
    revisions: db.prepare<[string, string], Pick<RevisionRow, "payload" | "replaced_at_ms" | "reason">>(
      `SELECT payload, replaced_at_ms, reason FROM entry_revisions
       WHERE session_id = ? AND entry_id = ? ORDER BY revision`,
    ),
    saveRegistration: db.prepare<[RegistrationRow], void>(
      `INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms)
       VALUES (@engine_id, @owner, @endpoint, @info, @protocol_version, @registered_at_ms)
       ON CONFLICT (engine_id) DO UPDATE SET owner = excluded.owner, endpoint = excluded.endpoint,
         info = excluded.info, protocol_version = excluded.protocol_version,
         registered_at_ms = excluded.registered_at_ms`,
    ),
    deleteRegistration: db.prepare<[string], void>("DELETE FROM engine_registrations WHERE engine_id = ?"),
    listRegistrations: db.prepare<[], RegistrationRow>("SELECT * FROM engine_registrations ORDER BY engine_id"),
    saveQuarantine: db.prepare<[QuarantineRow], void>(
      `INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms)
       VALUES (@engine_id, @payload, @updated_at_ms)
       ON CONFLICT (engine_id) DO UPDATE SET payload = excluded.payload, updated_at_ms = excluded.updated_at_ms`,
    ),
    clearQuarantine: db.prepare<[string], void>("DELETE FROM engine_quarantines WHERE engine_id = ?"),
    listQuarantines: db.prepare<[], QuarantineRow>("SELECT * FROM engine_quarantines ORDER BY engine_id"),
  };
}
