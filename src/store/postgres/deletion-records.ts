import { InvalidArgumentError } from "../../contract/errors.js";
import { checkTimeMs } from "../rows.js";
import {
  toExpiring,
  type DeleteOptions,
  type ExpiringRow,
  type ExpiringSession,
  type ForgetDelivery,
  type ForgetOutcome,
  type RetentionRule,
  type SessionDeletion,
} from "../deletions.js";
import { count, run, type PgDatabase, type Statement } from "./database.js";

// PostgresStore's DeletionStore (src/store/deletions.ts), as SqliteStore's (sqlite/deletion-records.ts).
// Deliveries are claimed by one UPDATE over a `FOR UPDATE SKIP LOCKED` subquery, so replicas claiming
// at the same moment split the due rows between them; an ack or a retry names the lease owner, so a
// replica whose lease ran out (and was taken over) cannot settle what another now holds.

/** ForgetReason.FORGET_REASON_PARENT_DELETED (engine.proto). */
const PARENT_DELETED = 2;
const ERROR_MAX_CHARS = 512;
const NEVER = Number.MAX_SAFE_INTEGER;

function stmt(name: string, text: string): Statement {
  return { name: `contextd_forget_${name}`, text };
}

const SQL = {
  recordEngine: stmt("record_engine", "INSERT INTO session_engines (session_id, engine_id, first_at_ms) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"),
  engines: stmt("engines", "SELECT engine_id FROM session_engines WHERE session_id = $1 ORDER BY engine_id"),
  lockRoot: stmt("lock_root", "SELECT session_id, updated_at_ms FROM sessions WHERE session_id = $1 FOR UPDATE"),
  tree: stmt(
    "tree",
    `WITH RECURSIVE tree(id) AS (
       SELECT $1::text COLLATE "C" UNION SELECT s.session_id FROM sessions s JOIN tree t ON s.parent_session_id = t.id AND s.parent_session_id <> ''
     )
     SELECT s.session_id, s.session_key, s.agent_id FROM tree JOIN sessions s ON s.session_id = tree.id`,
  ),
  deliver: stmt(
    "deliver",
    `INSERT INTO forget_deliveries (session_id, engine_id, session_key, agent_id, reason, deleted_at_ms, next_attempt_at_ms)
     SELECT session_id, engine_id, $2, $3, $4, $5, $5 FROM session_engines WHERE session_id = $1
     ON CONFLICT (session_id, engine_id) DO UPDATE SET
       session_key = excluded.session_key, agent_id = excluded.agent_id, reason = excluded.reason,
       deleted_at_ms = excluded.deleted_at_ms, attempts = 0, next_attempt_at_ms = excluded.next_attempt_at_ms,
       lease_owner = '', lease_until_ms = 0, last_error = ''`,
  ),
  dropEngines: stmt("drop_engines", "DELETE FROM session_engines WHERE session_id = $1"),
  // entries, revisions and idempotency keys go with the row (ON DELETE CASCADE).
  deleteSession: stmt("delete_session", "DELETE FROM sessions WHERE session_id = $1"),
  claim: stmt(
    "claim",
    `UPDATE forget_deliveries d SET lease_owner = $1, lease_until_ms = $3, attempts = d.attempts + 1
     FROM (SELECT session_id, engine_id FROM forget_deliveries WHERE next_attempt_at_ms <= $2 AND lease_until_ms <= $2
           ORDER BY next_attempt_at_ms, session_id, engine_id LIMIT $4 FOR UPDATE SKIP LOCKED) due
     WHERE d.session_id = due.session_id AND d.engine_id = due.engine_id
     RETURNING d.session_id, d.engine_id, d.session_key, d.agent_id, d.reason, d.deleted_at_ms, d.attempts`,
  ),
  done: stmt("done", "DELETE FROM forget_deliveries WHERE session_id = $1 AND engine_id = $2 AND lease_owner = $3 AND deleted_at_ms = $4"),
  retry: stmt(
    "retry",
    `UPDATE forget_deliveries SET next_attempt_at_ms = $5, last_error = $6, lease_owner = '', lease_until_ms = 0
     WHERE session_id = $1 AND engine_id = $2 AND lease_owner = $3 AND deleted_at_ms = $4`,
  ),
  wake: stmt("wake", "UPDATE forget_deliveries SET next_attempt_at_ms = $1 WHERE engine_id = $2 AND next_attempt_at_ms > $1"),
  pending: stmt("pending", "SELECT COUNT(*)::int AS n FROM forget_deliveries"),
  lease: stmt(
    "lease",
    `INSERT INTO leases (name, owner, until_ms) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
       WHERE leases.owner = excluded.owner OR leases.until_ms <= $4
     RETURNING owner`,
  ),
  expiring: stmt(
    "expiring",
    `SELECT session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms FROM sessions
     WHERE (CASE WHEN $1::text IS NULL THEN NOT (agent_id = ANY($2::text[])) ELSE agent_id = $1::text END)
       AND (($3::bigint IS NOT NULL AND updated_at_ms <= $5::bigint - $3::bigint) OR ($4::bigint IS NOT NULL AND created_at_ms <= $5::bigint - $4::bigint))
     ORDER BY LEAST(COALESCE(updated_at_ms + $3::bigint, ${NEVER}), COALESCE(created_at_ms + $4::bigint, ${NEVER})), session_id
     LIMIT $6`,
  ),
};

interface DeliveryRow {
  session_id: string;
  engine_id: string;
  session_key: string;
  agent_id: string;
  reason: number;
  deleted_at_ms: string | number;
  attempts: number;
}

export async function recordSessionEngine(db: PgDatabase, sessionId: string, engineId: string, atMs: number): Promise<void> {
  await db.transaction(async (conn) => void (await run(conn, SQL.recordEngine, [sessionId, engineId, atMs])));
}

export async function readSessionEngines(db: PgDatabase, sessionId: string): Promise<string[]> {
  const rows = await db.read((conn) => run<{ engine_id: string }>(conn, SQL.engines, [sessionId]));
  return rows.map((r) => r.engine_id);
}

export async function deleteSessionTree(db: PgDatabase, sessionId: string, options: DeleteOptions): Promise<SessionDeletion | undefined> {
  checkTimeMs(options.atMs, "atMs");
  return db.transaction(async (conn) => {
    const [root] = await run<{ session_id: string; updated_at_ms: string | number }>(conn, SQL.lockRoot, [sessionId]);
    if (!root) return undefined;
    if (options.expectUpdatedAtMs !== undefined && Number(root.updated_at_ms) !== options.expectUpdatedAtMs) return undefined;
    const tree = await run<{ session_id: string; session_key: string; agent_id: string }>(conn, SQL.tree, [sessionId]);
    const rows = [tree.find((r) => r.session_id === sessionId)!, ...(options.keepSubagents ? [] : tree.filter((r) => r.session_id !== sessionId))];
    let deliveries = 0;
    for (const r of rows) {
      const reason = r.session_id === sessionId ? options.reason : PARENT_DELETED;
      deliveries += await count(conn, SQL.deliver, [r.session_id, r.session_key, r.agent_id, reason, options.atMs]);
      await run(conn, SQL.dropEngines, [r.session_id]);
      await run(conn, SQL.deleteSession, [r.session_id]);
    }
    return { sessions: rows.map((r) => ({ sessionId: r.session_id, sessionKey: r.session_key, agentId: r.agent_id })), deliveries };
  });
}

export async function claimForgetDeliveries(db: PgDatabase, owner: string, nowMs: number, leaseMs: number, limit: number): Promise<ForgetDelivery[]> {
  checkTimeMs(nowMs, "nowMs");
  if (!Number.isInteger(limit) || limit <= 0) throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`);
  const rows = await db.transaction((conn) => run<DeliveryRow>(conn, SQL.claim, [owner, nowMs, nowMs + leaseMs, limit]));
  return rows.map((r) => ({
    sessionId: r.session_id,
    engineId: r.engine_id,
    sessionKey: r.session_key,
    agentId: r.agent_id,
    reason: r.reason,
    deletedAtMs: Number(r.deleted_at_ms),
    attempts: r.attempts,
  }));
}

export async function settleForgetDelivery(db: PgDatabase, d: ForgetDelivery, owner: string, outcome: ForgetOutcome): Promise<boolean> {
  return db.transaction(async (conn) =>
    outcome.done
      ? (await count(conn, SQL.done, [d.sessionId, d.engineId, owner, d.deletedAtMs])) > 0
      : (await count(conn, SQL.retry, [d.sessionId, d.engineId, owner, d.deletedAtMs, outcome.retryAtMs, outcome.error.slice(0, ERROR_MAX_CHARS)])) > 0,
  );
}

export async function wakeForgetDeliveries(db: PgDatabase, engineId: string, nowMs: number): Promise<number> {
  return db.transaction((conn) => count(conn, SQL.wake, [nowMs, engineId]));
}

export async function countForgetDeliveries(db: PgDatabase): Promise<number> {
  const [r] = await db.read((conn) => run<{ n: number }>(conn, SQL.pending));
  return r.n;
}

export async function tryLease(db: PgDatabase, name: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
  const rows = await db.transaction((conn) => run<{ owner: string }>(conn, SQL.lease, [name, owner, nowMs + ttlMs, nowMs]));
  return rows[0]?.owner === owner;
}

export async function listExpiringSessions(db: PgDatabase, rule: RetentionRule, cutoffMs: number, limit: number): Promise<ExpiringSession[]> {
  if (rule.maxIdleMs === undefined && rule.maxAgeMs === undefined) return [];
  const rows = await db.read((conn) =>
    run<ExpiringRow>(conn, SQL.expiring, [rule.agentId ?? null, rule.excludeAgents, rule.maxIdleMs ?? null, rule.maxAgeMs ?? null, cutoffMs, limit]),
  );
  return rows.map((r) => toExpiring(rule, r));
}
