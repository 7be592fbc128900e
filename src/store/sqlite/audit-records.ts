import type Database from "better-sqlite3";
import {
  reservationChanges,
  reservationRecords,
  type AgentUsage,
  type AuditQuery,
  type AuditRecord,
  type ReservationChange,
  type StoredAuditRecord,
} from "../audit-records.js";

interface AuditRow {
  id: number;
  at_ms: number;
  actor: string;
  action: string;
  target: string;
  peer: string;
  outcome: string;
  method: string;
  request_id: string;
}

/** The SQLite store's audit trail, reservations seen and agent usage (audit-records.ts), on the store's connection. */
export class SqliteAuditRecords {
  private readonly insert: Database.Statement;
  private readonly page: Database.Statement;
  private readonly prune: Database.Statement;
  private readonly usage: Database.Statement;
  private readonly reservations: Database.Statement;
  private readonly addReservation: Database.Statement;
  private readonly removeReservation: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare(
      `INSERT INTO audit_events (at_ms, actor, action, target, peer, outcome, method, request_id)
       VALUES (@atMs, @actor, @action, @target, @peer, @outcome, @method, @requestId)`,
    );
    // Every filter is a parameter: an empty one (or 0) matches every row.
    this.page = db.prepare(
      `SELECT * FROM audit_events
       WHERE (@beforeId = 0 OR id < @beforeId) AND at_ms >= @sinceMs AND (@untilMs = 0 OR at_ms < @untilMs)
         AND (@actor = '' OR actor = @actor) AND (@action = '' OR action = @action)
       ORDER BY id DESC LIMIT @limit`,
    );
    this.prune = db.prepare("DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at_ms < ? ORDER BY at_ms LIMIT ?)");
    this.usage = db.prepare("SELECT count(*) AS sessions, coalesce(sum(stored_bytes), 0) AS bytes FROM sessions WHERE agent_id = ?");
    this.reservations = db.prepare("SELECT engine_id, owner FROM config_reservations");
    this.addReservation = db.prepare("INSERT INTO config_reservations (engine_id, owner) VALUES (?, ?)");
    this.removeReservation = db.prepare("DELETE FROM config_reservations WHERE engine_id = ?");
  }

  append(record: AuditRecord): void {
    this.insert.run(record);
  }

  list(query: AuditQuery): StoredAuditRecord[] {
    return (this.page.all(query) as AuditRow[]).map(toRecord);
  }

  pruneBefore(beforeMs: number, limit: number): number {
    return this.prune.run(beforeMs, limit).changes;
  }

  agentUsage(agentId: string): AgentUsage {
    const row = this.usage.get(agentId) as { sessions: number; bytes: number };
    return { sessions: row.sessions, storedBytes: row.bytes };
  }

  /** In one IMMEDIATE transaction: the changes since the stored set, recorded and audited. */
  syncReservations(configured: ReadonlyMap<string, string>, atMs: number): ReservationChange[] {
    const run = this.db.transaction((): ReservationChange[] => {
      const stored = new Map((this.reservations.all() as { engine_id: string; owner: string }[]).map((r) => [r.engine_id, r.owner]));
      const changes = reservationChanges(stored, configured);
      for (const c of changes) {
        if (c.change === "remove") this.removeReservation.run(c.engineId);
        else this.addReservation.run(c.engineId, c.owner);
      }
      for (const record of reservationRecords(changes, atMs)) this.insert.run(record);
      return changes;
    });
    return run.immediate();
  }
}

function toRecord(r: AuditRow): StoredAuditRecord {
  return {
    id: r.id,
    atMs: r.at_ms,
    actor: r.actor,
    action: r.action,
    target: r.target,
    peer: r.peer,
    outcome: r.outcome,
    method: r.method,
    requestId: r.request_id,
  };
}
