import type { Statement } from "./database.js";

// The SQL of the PostgreSQL store. Each statement has a name, so the driver prepares it once per
// connection and afterwards only binds and executes it. Batches travel as arrays (unnest), so that
// one statement text serves any batch size.

function stmt(name: string, text: string): Statement {
  return { name: `contextd_${name}`, text };
}

const ENTRY_COLUMNS = "session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload, search";

/**
 * The search column (migration 7) of an entry's words (search-text.ts indexText: lower-cased runs of
 * letters and digits joined by single spaces): the parser sees nothing but words and spaces, and the
 * `simple` configuration keeps every word as it is, with its position.
 */
export const SEARCH_VECTOR = (words: string) => `to_tsvector('pg_catalog.simple', ${words})`;

/**
 * Part 0 of the active-view statements: the session row $1 as JSON, in the columns of the entry
 * parts — only when its agent is within the AgentScope $2 (exact ids), $3 (prefixes); else no row,
 * and no entry part joins anything.
 */
const VIEW_SESSION_PART = `WITH s AS (SELECT * FROM sessions WHERE session_id = $1
       AND (agent_id = ANY($2::text[]) OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(prefix) WHERE left(agent_id, length(p.prefix)) = p.prefix)))
     SELECT 0 AS part, row_to_json(s)::text AS session, NULL::bigint AS seq, NULL::bigint AS token_count, NULL::bytea AS payload FROM s`;

export const SQL = {
  session: stmt("session", "SELECT * FROM sessions WHERE session_id = $1"),
  countSessions: stmt("count_sessions", "SELECT COUNT(*) AS n FROM sessions"),
  /** Writers lock the session row first: that is what orders concurrent appends to one session. */
  lockSession: stmt("lock_session", "SELECT * FROM sessions WHERE session_id = $1 FOR UPDATE"),
  /** Creates the row unless it exists; a concurrent creator's uncommitted row makes this wait for it. */
  insertSession: stmt(
    "insert_session",
    `INSERT INTO sessions (session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms, header_json)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (session_id) DO NOTHING RETURNING session_id`,
  ),
  saveSession: stmt(
    "save_session",
    `UPDATE sessions SET updated_at_ms = $2, entry_count = $3, message_count = $4, compaction_count = $5,
       total_tokens = $6, last_seq = $7, last_entry_id = $8, latest_compaction_id = $9,
       latest_compaction_seq = $10, active_from_seq = $11, active_summary_tokens = $12,
       last_message_key = $13, last_message_timestamp_ms = $14
     WHERE session_id = $1`,
  ),
  insertEntries: stmt(
    "insert_entries",
    `INSERT INTO entries (${ENTRY_COLUMNS})
     SELECT $1, u.seq, u.id, u.parent_id, u.kind, u.role, u.token_count, u.timestamp_ms, u.hidden, u.message_key, u.payload, ${SEARCH_VECTOR("u.words")}
     FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[], $8::bigint[], $9::boolean[], $10::text[], $11::bytea[], $12::text[])
       AS u(seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload, words)`,
  ),
  /** The entries that hold any of the message keys $2 in session $1 (AppendMessagesRequest.message_keys). */
  entriesByMessageKey: stmt(
    "entries_by_message_key",
    "SELECT message_key, id, token_count FROM entries WHERE session_id = $1 AND message_key = ANY($2::text[])",
  ),
  entryById: stmt("entry_by_id", "SELECT seq, kind, role, hidden FROM entries WHERE session_id = $1 AND id = $2"),
  idempotencyKey: stmt("idempotency_key", "SELECT * FROM idempotency_keys WHERE session_id = $1 AND idempotency_key = $2"),
  insertIdempotencyKey: stmt(
    "insert_idempotency_key",
    `INSERT INTO idempotency_keys (session_id, idempotency_key, request_hash, entry_ids, token_counts, created_at_ms)
     VALUES ($1, $2, $3, $4, $5, $6)`,
  ),
  /**
   * The active view in one statement, hence one snapshot: the session row (as JSON, once), the
   * latest compaction entry by its seq, the pinned system messages before the cut (part 2,
   * docs/pinned-messages.md; role 4 = ROLE_SYSTEM spelled as in the partial index entries_pinned,
   * so that the planner may use it), then the message range from active_from_seq on (part 3).
   */
  activeView: stmt(
    "active_view",
    `${VIEW_SESSION_PART}
     UNION ALL
     SELECT 1, NULL, e.seq, e.token_count, e.payload FROM s JOIN entries e
       ON e.session_id = s.session_id AND e.seq = s.latest_compaction_seq AND s.latest_compaction_seq > 0
     UNION ALL
     SELECT 2, NULL, e.seq, e.token_count, e.payload FROM s JOIN entries e
       ON e.session_id = s.session_id AND e.seq < s.active_from_seq AND e.kind = 'message' AND e.role = 4 AND NOT e.hidden
     UNION ALL
     SELECT 3, NULL, e.seq, e.token_count, e.payload FROM s JOIN entries e
       ON e.session_id = s.session_id AND e.seq >= s.active_from_seq AND e.kind = 'message' AND NOT e.hidden
     ORDER BY part, seq`,
  ),
  /**
   * The session row, and the kept messages after seq $4 only while a cached view read at
   * ($5 created_at_ms, $6 latest_compaction_seq, $7 active_from_seq, $8 view_revision) still holds
   * (view-cache.ts): one statement, one snapshot; no entry rows when the view must be read whole.
   */
  activeViewSince: stmt(
    "active_view_since",
    `${VIEW_SESSION_PART}
     UNION ALL
     SELECT 3, NULL, e.seq, e.token_count, e.payload FROM s JOIN entries e
       ON e.session_id = s.session_id AND e.seq > $4 AND e.seq >= s.active_from_seq AND e.kind = 'message' AND NOT e.hidden
     WHERE s.created_at_ms = $5 AND s.latest_compaction_seq = $6 AND s.active_from_seq = $7 AND s.view_revision = $8
     ORDER BY part, seq`,
  ),
  /** Token totals of the active view by role (pinned system messages included), with the session row, in one statement. */
  activeTotals: stmt(
    "active_totals",
    `WITH s AS (SELECT * FROM sessions WHERE session_id = $1)
     SELECT 0 AS part, row_to_json(s)::text AS session, NULL::int AS role, NULL::bigint AS tokens FROM s
     UNION ALL
     SELECT 1, NULL, v.role, SUM(v.token_count)::bigint FROM (
       SELECT e.role, e.token_count FROM s JOIN entries e
         ON e.session_id = s.session_id AND e.seq >= s.active_from_seq AND e.kind = 'message' AND NOT e.hidden
       UNION ALL
       SELECT e.role, e.token_count FROM s JOIN entries e
         ON e.session_id = s.session_id AND e.seq < s.active_from_seq AND e.kind = 'message' AND e.role = 4 AND NOT e.hidden
     ) v
     GROUP BY v.role
     ORDER BY part`,
  ),
  entriesAfter: stmt("entries_after", "SELECT payload FROM entries WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"),
  sessionExists: stmt("session_exists", "SELECT 1 FROM sessions WHERE session_id = $1"),
  /** $2 the exact agent ids, $3 the prefixes (AgentScope): one statement serves every scope. */
  listFirst: stmt(
    "list_first_scoped",
    `SELECT * FROM sessions
     WHERE (agent_id = ANY($2::text[]) OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(prefix) WHERE left(agent_id, length(p.prefix)) = p.prefix))
     ORDER BY updated_at_ms DESC, session_id ASC LIMIT $1`,
  ),
  listAfter: stmt(
    "list_after_scoped",
    `SELECT * FROM sessions WHERE updated_at_ms <= $1 AND (updated_at_ms < $1 OR session_id > $2)
       AND (agent_id = ANY($4::text[]) OR EXISTS (SELECT 1 FROM unnest($5::text[]) AS p(prefix) WHERE left(agent_id, length(p.prefix)) = p.prefix))
     ORDER BY updated_at_ms DESC, session_id ASC LIMIT $3`,
  ),
  /** Entries, revisions and idempotency keys go with it (ON DELETE CASCADE). */
  deleteSession: stmt("delete_session", "DELETE FROM sessions WHERE session_id = $1"),
  setSystemAdditionTokens: stmt("set_system_addition_tokens", "UPDATE sessions SET system_addition_tokens = $2 WHERE session_id = $1"),
  // subagent TTLs (subagent-records.ts)
  setExpiry: stmt("set_expiry", "UPDATE sessions SET expires_at_ms = $2 WHERE session_id = $1"),
  subagentState: stmt("subagent_state", "SELECT expires_at_ms, ended_at_ms, end_reason FROM sessions WHERE session_id = $1"),
  /** Waits for a sweep that holds the row, then finds it ended (ended_at_ms is re-checked on the new version). */
  endSession: stmt("end_session", "UPDATE sessions SET ended_at_ms = $2, end_reason = $3 WHERE session_id = $1 AND ended_at_ms = 0 RETURNING session_id"),
  reopenSession: stmt("reopen_session", "UPDATE sessions SET ended_at_ms = 0, end_reason = 0 WHERE session_id = $1 AND ended_at_ms = $2"),
  /**
   * The sweep's claim, one statement: lock the expired children nobody else holds (SKIP LOCKED: a
   * replica claiming at the same moment, or an append holding the row, makes this one pass them
   * over), mark them ended, return them. A row another claim ended meanwhile fails the re-check
   * of `ended_at_ms = 0` after the lock and is not returned. The locking SELECT is a MATERIALIZED
   * CTE so that it runs once: as a plain subquery the planner may scan it again per outer row and
   * claim more than `$2`.
   */
  claimExpired: stmt(
    "claim_expired",
    `WITH c AS MATERIALIZED (
       SELECT session_id FROM sessions
       WHERE expires_at_ms > 0 AND ended_at_ms = 0 AND expires_at_ms <= $1
       ORDER BY expires_at_ms, session_id LIMIT $2
       FOR UPDATE SKIP LOCKED)
     UPDATE sessions s SET ended_at_ms = $1, end_reason = $3
     FROM c WHERE s.session_id = c.session_id AND s.ended_at_ms = 0
     RETURNING s.session_id, s.session_key, s.agent_id, s.parent_session_id, s.expires_at_ms`,
  ),
  // rewrites
  rewriteTargets: stmt("rewrite_targets", "SELECT id, seq, kind, token_count, payload FROM entries WHERE session_id = $1 AND id = ANY($2::text[])"),
  updateEntry: stmt(
    "update_entry",
    `UPDATE entries SET role = $3, token_count = $4, payload = $5, search = ${SEARCH_VECTOR("$6::text")} WHERE session_id = $1 AND seq = $2`,
  ),
  // History search (search.ts): a session's matches by seq, highest first, before $3.
  searchSession: stmt(
    "search_session",
    `SELECT seq, payload FROM entries WHERE session_id = $1 AND search @@ $2::tsquery AND seq < $3
     ORDER BY seq DESC LIMIT $4`,
  ),
  // An agent's matches in NEWEST order (sessions newest-created first, then by id; seq highest first) after ($3, $4, $5).
  searchAgent: stmt(
    "search_agent",
    `SELECT e.session_id, s.created_at_ms, e.seq, e.payload FROM entries e JOIN sessions s ON s.session_id = e.session_id
     WHERE s.agent_id = $1 AND e.search @@ $2::tsquery
       AND ($3::bigint IS NULL OR s.created_at_ms < $3
            OR (s.created_at_ms = $3 AND (e.session_id > $4 OR (e.session_id = $4 AND e.seq < $5))))
     ORDER BY s.created_at_ms DESC, e.session_id ASC, e.seq DESC LIMIT $6`,
  ),
  entryPayloadById: stmt("entry_payload_by_id", "SELECT payload FROM entries WHERE session_id = $1 AND id = $2"),
  previousCompaction: stmt(
    "previous_compaction",
    "SELECT payload FROM entries WHERE session_id = $1 AND seq < $2 AND kind = 'compaction' ORDER BY seq DESC LIMIT 1",
  ),
  insertRevision: stmt(
    "insert_revision",
    `INSERT INTO entry_revisions (session_id, entry_id, revision, token_count, replaced_at_ms, reason, payload)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
  ),
  revisions: stmt("revisions", "SELECT payload, replaced_at_ms, reason FROM entry_revisions WHERE session_id = $1 AND entry_id = $2 ORDER BY revision"),
  // registry
  // The engine row of a claim, locked: a new one is inserted (`inserted`), a held one is returned
  // as it is (the no-op update takes its row lock, so two claims of one id serialize here and the
  // second sees the first's owner).
  lockRegistration: stmt(
    "lock_registration",
    `INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (engine_id) DO UPDATE SET owner = engine_registrations.owner
     RETURNING *, (xmax = 0) AS inserted`,
  ),
  saveRegistration: stmt(
    "save_registration",
    `UPDATE engine_registrations SET endpoint = $2, info = $3, protocol_version = $4, registered_at_ms = $5 WHERE engine_id = $1`,
  ),
  registration: stmt("registration", "SELECT * FROM engine_registrations WHERE engine_id = $1 FOR UPDATE"),
  deleteRegistration: stmt("delete_registration", "DELETE FROM engine_registrations WHERE engine_id = $1"),
  bareRegistrations: stmt(
    "bare_registrations",
    "SELECT * FROM engine_registrations r WHERE NOT EXISTS (SELECT 1 FROM engine_instances i WHERE i.engine_id = r.engine_id) ORDER BY engine_id",
  ),
  saveInstance: stmt(
    "save_instance",
    `INSERT INTO engine_instances (engine_id, instance_id, endpoint, locality, info, protocol_version, registered_at_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (engine_id, instance_id) DO UPDATE SET endpoint = excluded.endpoint, locality = excluded.locality,
       info = excluded.info, protocol_version = excluded.protocol_version, registered_at_ms = excluded.registered_at_ms`,
  ),
  instance: stmt("instance", "SELECT * FROM engine_instances WHERE engine_id = $1 AND instance_id = $2"),
  latestInstance: stmt("latest_instance", "SELECT * FROM engine_instances WHERE engine_id = $1 ORDER BY registered_at_ms DESC, instance_id LIMIT 1"),
  deleteInstance: stmt("delete_instance", "DELETE FROM engine_instances WHERE engine_id = $1 AND instance_id = $2"),
  deleteInstances: stmt("delete_instances", "DELETE FROM engine_instances WHERE engine_id = $1"),
  // Instance rows left by an older replica's deregistration (no engine row) are not registrations.
  listInstances: stmt(
    "list_instances",
    "SELECT i.*, r.owner FROM engine_instances i JOIN engine_registrations r ON r.engine_id = i.engine_id ORDER BY i.engine_id, i.instance_id",
  ),
  saveQuarantine: stmt(
    "save_quarantine",
    `INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms) VALUES ($1, $2, $3)
     ON CONFLICT (engine_id) DO UPDATE SET payload = excluded.payload, updated_at_ms = excluded.updated_at_ms`,
  ),
  clearQuarantine: stmt("clear_quarantine", "DELETE FROM engine_quarantines WHERE engine_id = $1"),
  listQuarantines: stmt("list_quarantines", "SELECT * FROM engine_quarantines ORDER BY engine_id"),
  saveInstanceQuarantine: stmt(
    "save_instance_quarantine",
    `INSERT INTO engine_instance_quarantines (engine_id, instance_id, payload, updated_at_ms) VALUES ($1, $2, $3, $4)
     ON CONFLICT (engine_id, instance_id) DO UPDATE SET payload = excluded.payload, updated_at_ms = excluded.updated_at_ms`,
  ),
  clearInstanceQuarantine: stmt("clear_instance_quarantine", "DELETE FROM engine_instance_quarantines WHERE engine_id = $1 AND instance_id = $2"),
  clearInstanceQuarantines: stmt("clear_instance_quarantines", "DELETE FROM engine_instance_quarantines WHERE engine_id = $1"),
  listInstanceQuarantines: stmt("list_instance_quarantines", "SELECT * FROM engine_instance_quarantines ORDER BY engine_id, instance_id"),
  /** Sent in the transaction of every registry write (registry-records.ts), delivered at its commit. */
  notifyRegistry: stmt("notify_registry", "SELECT pg_notify($1, $2)"),
} satisfies Record<string, Statement>;
