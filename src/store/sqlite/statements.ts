import type Database from "better-sqlite3";

import { Role } from "../../contract/gen/contextd/v1/types.js";
import type { InstanceQuarantineRow, InstanceRow, OwnedInstanceRow, QuarantineRow, RegistrationRow } from "../registry-rows.js";
import type { EntryUpdateRow, RevisionRow, RewriteTargetRow } from "../rewrite-rows.js";
import type { EntryRow, ExpiredRow, IdempotencyRow, PayloadRow, SessionRow, SubagentStateRow } from "../rows.js";

// The SQL of the SQLite store. Statements are prepared once per connection, so the write paths only
// bind parameters; the row types they bind and return are in rows.ts and registry-rows.ts.

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

/** Every statement the store runs, prepared once per connection (named, so declarations can be emitted). */
export interface Statements {
  session: Stmt<[string], SessionRow>;
  /** Answers the session's search_id (max + 1: sessions_by_search_id makes that one index probe). */
  insertSession: Stmt<[SessionRow], { search_id: number }>;
  saveSession: Stmt<[SessionRow], void>;
  insertEntry: Stmt<[EntryRow], void>;
  // the search log (migration 9, search-index.ts): what the indexer is to apply, in order
  logSearch: Stmt<[number, number, number], void>;
  lastLogged: Stmt<[], { seq: number }>;
  trimSearchLog: Stmt<[number], void>;
  sessionEntryById: Stmt<[string, string], { payload: Buffer }>;
  previousCompaction: Stmt<[string, number], { payload: Buffer }>;
  /** The entry that holds a message key in a session (AppendMessagesRequest.message_keys). */
  entryByMessageKey: Stmt<[string, string], { id: string; token_count: number }>;
  entryById: Stmt<[string, string], { seq: number; kind: string; role: number | null; hidden: number }>;
  idempotencyKey: Stmt<[string, string], IdempotencyRow>;
  insertIdempotencyKey: Stmt<[IdempotencyRow], void>;
  entryBySeq: Stmt<[string, number], PayloadRow>;
  activeMessages: Stmt<[string, number], PayloadRow>;
  /** SQLite's count of other connections' commits to the file (view-cache.ts). */
  dataVersion: Stmt<[], { data_version: number }>;
  activeTokensByRole: Stmt<[string, number], { role: number; tokens: number }>;
  pinnedMessages: Stmt<[string, number], PayloadRow>;
  pinnedTokens: Stmt<[string, number], { tokens: number | null }>;
  entriesAfter: Stmt<[string, number, number], { payload: Buffer }>;
  listFirst: Stmt<[{ e: string; p: string; n: number }], SessionRow>;
  listAfter: Stmt<[{ u: number; s: string; e: string; p: string; n: number }], SessionRow>;
  setSystemAdditionTokens: Stmt<[number, string], void>;
  // subagent TTLs
  setExpiry: Stmt<[number, string], void>;
  subagentState: Stmt<[string], SubagentStateRow>;
  endSession: Stmt<[number, number, string], void>;
  reopenSession: Stmt<[string, number], void>;
  expiredSessions: Stmt<[number, number], ExpiredRow>;
  // rewrites
  rewriteTarget: Stmt<[string, string], RewriteTargetRow>;
  updateEntry: Stmt<[EntryUpdateRow], void>;
  insertRevision: Stmt<[RevisionRow], void>;
  revisions: Stmt<[string, string], Pick<RevisionRow, "payload" | "replaced_at_ms" | "reason">>;
  // registry
  saveRegistration: Stmt<[RegistrationRow], void>;
  registration: Stmt<[string], RegistrationRow>;
  deleteRegistration: Stmt<[string], void>;
  bareRegistrations: Stmt<[], RegistrationRow>;
  saveInstance: Stmt<[InstanceRow], void>;
  instance: Stmt<[string, string], InstanceRow>;
  latestInstance: Stmt<[string], InstanceRow>;
  deleteInstance: Stmt<[string, string], void>;
  deleteInstances: Stmt<[string], void>;
  listInstances: Stmt<[], OwnedInstanceRow>;
  saveQuarantine: Stmt<[QuarantineRow], void>;
  clearQuarantine: Stmt<[string], void>;
  listQuarantines: Stmt<[], QuarantineRow>;
  saveInstanceQuarantine: Stmt<[InstanceQuarantineRow], void>;
  clearInstanceQuarantine: Stmt<[string, string], void>;
  clearInstanceQuarantines: Stmt<[string], void>;
  listInstanceQuarantines: Stmt<[], InstanceQuarantineRow>;
}

/** Every statement the store runs, prepared once per connection. */
/**
 * A listing's agent filter (AgentScope): @e the exact agent ids, @p the prefixes, as JSON arrays —
 * so one prepared statement serves every scope. substr/length count characters on both sides.
 */
const IN_SCOPE = `(agent_id IN (SELECT value FROM json_each(@e))
  OR EXISTS (SELECT 1 FROM json_each(@p) WHERE substr(agent_id, 1, length(value)) = value))`;

export function prepareStatements(db: Database.Database): Statements {
  return {
    session: db.prepare<[string], SessionRow>("SELECT * FROM sessions WHERE session_id = ?"),
    insertSession: db.prepare<[SessionRow], { search_id: number }>(
      `INSERT INTO sessions (session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms, header_json, search_id)
       VALUES (@session_id, @session_key, @agent_id, @parent_session_id, @created_at_ms, @updated_at_ms, @header_json,
               (SELECT coalesce(max(search_id), 0) + 1 FROM sessions))
       RETURNING search_id`,
    ),
    logSearch: db.prepare<[number, number, number], void>("INSERT INTO search_log (kind, search_id, seq) VALUES (?, ?, ?)"),
    lastLogged: db.prepare<[], { seq: number }>("SELECT seq FROM sqlite_sequence WHERE name = 'search_log'"),
    trimSearchLog: db.prepare<[number], void>("DELETE FROM search_log WHERE op <= ?"),
    sessionEntryById: db.prepare<[string, string], { payload: Buffer }>("SELECT payload FROM entries WHERE session_id = ? AND id = ?"),
    // Compaction entries are few: the scan back from beforeSeq stops at the first one.
    previousCompaction: db.prepare<[string, number], { payload: Buffer }>(
      "SELECT payload FROM entries WHERE session_id = ? AND seq < ? AND kind = 'compaction' ORDER BY seq DESC LIMIT 1",
    ),
    saveSession: db.prepare<[SessionRow], void>(
      `UPDATE sessions SET updated_at_ms = @updated_at_ms, entry_count = @entry_count,
         message_count = @message_count, compaction_count = @compaction_count,
         total_tokens = @total_tokens, last_seq = @last_seq, last_entry_id = @last_entry_id,
         latest_compaction_id = @latest_compaction_id, latest_compaction_seq = @latest_compaction_seq,
         active_from_seq = @active_from_seq, active_summary_tokens = @active_summary_tokens,
         last_message_key = @last_message_key, last_message_timestamp_ms = @last_message_timestamp_ms
       WHERE session_id = @session_id`,
    ),
    insertEntry: db.prepare<[EntryRow], void>(
      `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload)
       VALUES (@session_id, @seq, @id, @parent_id, @kind, @role, @token_count, @timestamp_ms, @hidden, @message_key, @payload)`,
    ),
    entryByMessageKey: db.prepare<[string, string], { id: string; token_count: number }>(
      "SELECT id, token_count FROM entries WHERE session_id = ? AND message_key = ?",
    ),
    entryById: db.prepare<[string, string], { seq: number; kind: string; role: number | null; hidden: number }>(
      "SELECT seq, kind, role, hidden FROM entries WHERE session_id = ? AND id = ?",
    ),
    idempotencyKey: db.prepare<[string, string], IdempotencyRow>("SELECT * FROM idempotency_keys WHERE session_id = ? AND idempotency_key = ?"),
    insertIdempotencyKey: db.prepare<[IdempotencyRow], void>(
      `INSERT INTO idempotency_keys (session_id, idempotency_key, request_hash, entry_ids, token_counts, created_at_ms)
       VALUES (@session_id, @idempotency_key, @request_hash, @entry_ids, @token_counts, @created_at_ms)`,
    ),
    entryBySeq: db.prepare<[string, number], PayloadRow>("SELECT seq, token_count, payload FROM entries WHERE session_id = ? AND seq = ?"),
    dataVersion: db.prepare<[], { data_version: number }>("PRAGMA data_version"),
    activeMessages: db.prepare<[string, number], PayloadRow>(
      `SELECT seq, token_count, payload FROM entries
       WHERE session_id = ? AND seq >= ? AND kind = 'message' AND hidden = 0 ORDER BY seq`,
    ),
    activeTokensByRole: db.prepare<[string, number], { role: number; tokens: number }>(
      `SELECT role, SUM(token_count) AS tokens FROM entries
       WHERE session_id = ? AND seq >= ? AND kind = 'message' AND hidden = 0 GROUP BY role`,
    ),
    // Pinned system messages before the view's cut (docs/pinned-messages.md). The role is spelled
    // as a literal, as in the partial index entries_pinned (migration 5), so that the index serves
    // these: SQLite uses a partial index only when the query's WHERE names its terms.
    pinnedMessages: db.prepare<[string, number], PayloadRow>(
      `SELECT seq, token_count, payload FROM entries
       WHERE session_id = ? AND seq < ? AND kind = 'message' AND role = ${Role.ROLE_SYSTEM} AND hidden = 0 ORDER BY seq`,
    ),
    pinnedTokens: db.prepare<[string, number], { tokens: number | null }>(
      `SELECT SUM(token_count) AS tokens FROM entries
       WHERE session_id = ? AND seq < ? AND kind = 'message' AND role = ${Role.ROLE_SYSTEM} AND hidden = 0`,
    ),
    entriesAfter: db.prepare<[string, number, number], { payload: Buffer }>(
      "SELECT payload FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    ),
    listFirst: db.prepare<[{ e: string; p: string; n: number }], SessionRow>(
      `SELECT * FROM sessions WHERE ${IN_SCOPE}
       ORDER BY updated_at_ms DESC, session_id ASC LIMIT @n`,
    ),
    listAfter: db.prepare<[{ u: number; s: string; e: string; p: string; n: number }], SessionRow>(
      `SELECT * FROM sessions
       WHERE updated_at_ms <= @u AND (updated_at_ms < @u OR session_id > @s) AND ${IN_SCOPE}
       ORDER BY updated_at_ms DESC, session_id ASC LIMIT @n`,
    ),
    setSystemAdditionTokens: db.prepare<[number, string], void>("UPDATE sessions SET system_addition_tokens = ? WHERE session_id = ?"),
    setExpiry: db.prepare<[number, string], void>("UPDATE sessions SET expires_at_ms = ? WHERE session_id = ?"),
    subagentState: db.prepare<[string], SubagentStateRow>("SELECT expires_at_ms, ended_at_ms, end_reason FROM sessions WHERE session_id = ?"),
    endSession: db.prepare<[number, number, string], void>("UPDATE sessions SET ended_at_ms = ?, end_reason = ? WHERE session_id = ? AND ended_at_ms = 0"),
    reopenSession: db.prepare<[string, number], void>("UPDATE sessions SET ended_at_ms = 0, end_reason = 0 WHERE session_id = ? AND ended_at_ms = ?"),
    // The partial index sessions_expiring serves this (its WHERE is implied by this one's).
    expiredSessions: db.prepare<[number, number], ExpiredRow>(
      `SELECT session_id, session_key, agent_id, parent_session_id, expires_at_ms FROM sessions
       WHERE expires_at_ms > 0 AND ended_at_ms = 0 AND expires_at_ms <= ?
       ORDER BY expires_at_ms, session_id LIMIT ?`,
    ),
    rewriteTarget: db.prepare<[string, string], RewriteTargetRow>("SELECT seq, kind, token_count, payload FROM entries WHERE session_id = ? AND id = ?"),
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
    // Ownership is decided before these run, in the claim's transaction (registry-records.ts).
    saveRegistration: db.prepare<[RegistrationRow], void>(
      `INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms)
       VALUES (@engine_id, @owner, @endpoint, @info, @protocol_version, @registered_at_ms)
       ON CONFLICT (engine_id) DO UPDATE SET owner = excluded.owner, endpoint = excluded.endpoint,
         info = excluded.info, protocol_version = excluded.protocol_version,
         registered_at_ms = excluded.registered_at_ms`,
    ),
    registration: db.prepare<[string], RegistrationRow>("SELECT * FROM engine_registrations WHERE engine_id = ?"),
    deleteRegistration: db.prepare<[string], void>("DELETE FROM engine_registrations WHERE engine_id = ?"),
    bareRegistrations: db.prepare<[], RegistrationRow>(
      `SELECT * FROM engine_registrations r
       WHERE NOT EXISTS (SELECT 1 FROM engine_instances i WHERE i.engine_id = r.engine_id) ORDER BY engine_id`,
    ),
    saveInstance: db.prepare<[InstanceRow], void>(
      `INSERT INTO engine_instances (engine_id, instance_id, endpoint, locality, info, protocol_version, registered_at_ms)
       VALUES (@engine_id, @instance_id, @endpoint, @locality, @info, @protocol_version, @registered_at_ms)
       ON CONFLICT (engine_id, instance_id) DO UPDATE SET endpoint = excluded.endpoint, locality = excluded.locality,
         info = excluded.info, protocol_version = excluded.protocol_version, registered_at_ms = excluded.registered_at_ms`,
    ),
    instance: db.prepare<[string, string], InstanceRow>("SELECT * FROM engine_instances WHERE engine_id = ? AND instance_id = ?"),
    latestInstance: db.prepare<[string], InstanceRow>("SELECT * FROM engine_instances WHERE engine_id = ? ORDER BY registered_at_ms DESC, instance_id LIMIT 1"),
    deleteInstance: db.prepare<[string, string], void>("DELETE FROM engine_instances WHERE engine_id = ? AND instance_id = ?"),
    deleteInstances: db.prepare<[string], void>("DELETE FROM engine_instances WHERE engine_id = ?"),
    // Instance rows left by an older replica's deregistration (no engine row) are not registrations.
    listInstances: db.prepare<[], OwnedInstanceRow>(
      `SELECT i.*, r.owner FROM engine_instances i JOIN engine_registrations r ON r.engine_id = i.engine_id
       ORDER BY i.engine_id, i.instance_id`,
    ),
    saveQuarantine: db.prepare<[QuarantineRow], void>(
      `INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms)
       VALUES (@engine_id, @payload, @updated_at_ms)
       ON CONFLICT (engine_id) DO UPDATE SET payload = excluded.payload, updated_at_ms = excluded.updated_at_ms`,
    ),
    clearQuarantine: db.prepare<[string], void>("DELETE FROM engine_quarantines WHERE engine_id = ?"),
    listQuarantines: db.prepare<[], QuarantineRow>("SELECT * FROM engine_quarantines ORDER BY engine_id"),
    saveInstanceQuarantine: db.prepare<[InstanceQuarantineRow], void>(
      `INSERT INTO engine_instance_quarantines (engine_id, instance_id, payload, updated_at_ms)
       VALUES (@engine_id, @instance_id, @payload, @updated_at_ms)
       ON CONFLICT (engine_id, instance_id) DO UPDATE SET payload = excluded.payload, updated_at_ms = excluded.updated_at_ms`,
    ),
    clearInstanceQuarantine: db.prepare<[string, string], void>("DELETE FROM engine_instance_quarantines WHERE engine_id = ? AND instance_id = ?"),
    clearInstanceQuarantines: db.prepare<[string], void>("DELETE FROM engine_instance_quarantines WHERE engine_id = ?"),
    listInstanceQuarantines: db.prepare<[], InstanceQuarantineRow>("SELECT * FROM engine_instance_quarantines ORDER BY engine_id, instance_id"),
  };
}
