import {
  reservationChanges,
  reservationRecords,
  type AgentUsage,
  type AuditQuery,
  type AuditRecord,
  type ReservationChange,
  type StoredAuditRecord,
} from "../audit-records.js";
import type { Conn, PgDatabase } from "./database.js";

interface AuditRow {
  id: string;
  at_ms: string;
  actor: string;
  action: string;
  target: string;
  peer: string;
  outcome: string;
  method: string;
  request_id: string;
}

const INSERT = `INSERT INTO audit_events (at_ms, actor, action, target, peer, outcome, method, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;

function insertParams(r: AuditRecord): unknown[] {
  return [r.atMs, r.actor, r.action, r.target, r.peer, r.outcome, r.method, r.requestId];
}

/** The PostgreSQL store's audit trail, reservations seen and agent usage (audit-records.ts). */
export async function appendAudit(db: PgDatabase, record: AuditRecord): Promise<void> {
  await db.transaction((conn) => conn.query(INSERT, insertParams(record)));
}

export async function listAudit(db: PgDatabase, q: AuditQuery): Promise<StoredAuditRecord[]> {
  const { rows } = await db.read((conn) =>
    conn.query<AuditRow>(
      `SELECT * FROM audit_events
       WHERE ($1::bigint = 0 OR id < $1) AND at_ms >= $2 AND ($3::bigint = 0 OR at_ms < $3)
         AND ($4::text = '' OR actor = $4) AND ($5::text = '' OR action = $5)
       ORDER BY id DESC LIMIT $6`,
      [q.beforeId, q.sinceMs, q.untilMs, q.actor, q.action, q.limit],
    ),
  );
  return rows.map((r) => ({
    id: Number(r.id),
    atMs: Number(r.at_ms),
    actor: r.actor,
    action: r.action,
    target: r.target,
    peer: r.peer,
    outcome: r.outcome,
    method: r.method,
    requestId: r.request_id,
  }));
}

export async function pruneAudit(db: PgDatabase, beforeMs: number, limit: number): Promise<number> {
  const result = await db.transaction((conn) =>
    conn.query("DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at_ms < $1 ORDER BY at_ms LIMIT $2)", [beforeMs, limit]),
  );
  return result.rowCount ?? 0;
}

export async function agentUsage(db: PgDatabase, agentId: string): Promise<AgentUsage> {
  const { rows } = await db.read((conn) =>
    conn.query<{ sessions: string; bytes: string }>("SELECT count(*) AS sessions, coalesce(sum(stored_bytes), 0) AS bytes FROM sessions WHERE agent_id = $1", [
      agentId,
    ]),
  );
  return { sessions: Number(rows[0].sessions), storedBytes: Number(rows[0].bytes) };
}

/**
 * One transaction under an advisory lock, so that replicas starting at once record each change
 * once: the changes since the stored set, recorded and audited.
 */
export async function syncReservations(db: PgDatabase, configured: ReadonlyMap<string, string>, atMs: number): Promise<ReservationChange[]> {
  return db.transaction(async (conn: Conn) => {
    await conn.query("SELECT pg_advisory_xact_lock(hashtext('contextd.config_reservations'))");
    const { rows } = await conn.query<{ engine_id: string; owner: string }>("SELECT engine_id, owner FROM config_reservations");
    const changes = reservationChanges(new Map(rows.map((r) => [r.engine_id, r.owner])), configured);
    for (const c of changes) {
      if (c.change === "remove") await conn.query("DELETE FROM config_reservations WHERE engine_id = $1", [c.engineId]);
      else await conn.query("INSERT INTO config_reservations (engine_id, owner) VALUES ($1, $2)", [c.engineId, c.owner]);
    }
    for (const record of reservationRecords(changes, atMs)) await conn.query(INSERT, insertParams(record));
    return changes;
  });
}
