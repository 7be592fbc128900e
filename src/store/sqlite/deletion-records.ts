import type Database from "better-sqlite3";

import { InvalidArgumentError } from "../../contract/errors.js";
import { checkTimeMs } from "../rows.js";
import type { DeleteOptions, ExpiringSession, ForgetDelivery, ForgetOutcome, RetentionRule, SessionDeletion } from "../deletions.js";
import { toExpiring, type ExpiringRow } from "../deletions.js";
import { LOG_DELETE_SESSION } from "./search-index.js";

/** ForgetReason.FORGET_REASON_PARENT_DELETED (engine.proto): what a deleted session's subagents are forgotten with. */
const PARENT_DELETED = 2;
/** Longest error text kept on a delivery. */
const ERROR_MAX_CHARS = 512;
/** "Never" in the expiry arithmetic: later than any millisecond time. */
const NEVER = Number.MAX_SAFE_INTEGER;

interface DeliveryRow {
  session_id: string;
  engine_id: string;
  session_key: string;
  agent_id: string;
  reason: number;
  deleted_at_ms: number;
  attempts: number;
}

/**
 * SqliteStore's DeletionStore (src/store/deletions.ts): the engines that served each session, the
 * deletion of a session tree with its forget deliveries in one IMMEDIATE transaction, the
 * deliveries' row leases and the named leases. One process owns the file, so a lease is only ever
 * contested by this process's own loops; the statements are the same as PostgreSQL's all the same.
 */
export class SqliteDeletions {
  private readonly s;

  constructor(db: Database.Database) {
    this.s = {
      recordEngine: db.prepare<[string, string, number], void>(
        "INSERT INTO session_engines (session_id, engine_id, first_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
      ),
      engines: db.prepare<[string], { engine_id: string }>("SELECT engine_id FROM session_engines WHERE session_id = ? ORDER BY engine_id"),
      tree: db.prepare<[string], ExpiringRow & { search_id: number | null }>(
        `WITH RECURSIVE tree(id) AS (
           SELECT ? UNION SELECT s.session_id FROM sessions s JOIN tree t ON s.parent_session_id = t.id AND s.parent_session_id <> ''
         )
         SELECT s.session_id, s.session_key, s.agent_id, s.parent_session_id, s.created_at_ms, s.updated_at_ms, s.search_id
         FROM tree JOIN sessions s ON s.session_id = tree.id`,
      ),
      one: db.prepare<[string], ExpiringRow & { search_id: number | null }>(
        "SELECT session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms, search_id FROM sessions WHERE session_id = ?",
      ),
      logSearch: db.prepare<[number, number, number], void>("INSERT INTO search_log (kind, search_id, seq) VALUES (?, ?, ?)"),
      deleteRevisions: db.prepare<[string], void>("DELETE FROM entry_revisions WHERE session_id = ?"),
      deleteKeys: db.prepare<[string], void>("DELETE FROM idempotency_keys WHERE session_id = ?"),
      deleteEntries: db.prepare<[string], void>("DELETE FROM entries WHERE session_id = ?"),
      deleteSession: db.prepare<[string], void>("DELETE FROM sessions WHERE session_id = ?"),
      deliver: db.prepare<[{ id: string; key: string; agent: string; reason: number; at: number }], void>(
        `INSERT INTO forget_deliveries (session_id, engine_id, session_key, agent_id, reason, deleted_at_ms, next_attempt_at_ms)
         SELECT session_id, engine_id, @key, @agent, @reason, @at, @at FROM session_engines WHERE session_id = @id
         ON CONFLICT (session_id, engine_id) DO UPDATE SET
           session_key = excluded.session_key, agent_id = excluded.agent_id, reason = excluded.reason,
           deleted_at_ms = excluded.deleted_at_ms, attempts = 0, next_attempt_at_ms = excluded.next_attempt_at_ms,
           lease_owner = '', lease_until_ms = 0, last_error = ''`,
      ),
      engineCount: db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM session_engines WHERE session_id = ?"),
      dropEngines: db.prepare<[string], void>("DELETE FROM session_engines WHERE session_id = ?"),
      claim: db.prepare<[{ owner: string; now: number; until: number; n: number }], DeliveryRow>(
        `UPDATE forget_deliveries SET lease_owner = @owner, lease_until_ms = @until, attempts = attempts + 1
         WHERE rowid IN (SELECT rowid FROM forget_deliveries WHERE next_attempt_at_ms <= @now AND lease_until_ms <= @now
                         ORDER BY next_attempt_at_ms, session_id, engine_id LIMIT @n)
         RETURNING session_id, engine_id, session_key, agent_id, reason, deleted_at_ms, attempts`,
      ),
      done: db.prepare<[string, string, string, number], void>(
        "DELETE FROM forget_deliveries WHERE session_id = ? AND engine_id = ? AND lease_owner = ? AND deleted_at_ms = ?",
      ),
      retry: db.prepare<[number, string, string, string, string, number], void>(
        `UPDATE forget_deliveries SET next_attempt_at_ms = ?, last_error = ?, lease_owner = '', lease_until_ms = 0
         WHERE session_id = ? AND engine_id = ? AND lease_owner = ? AND deleted_at_ms = ?`,
      ),
      wake: db.prepare<[number, string, number], void>("UPDATE forget_deliveries SET next_attempt_at_ms = ? WHERE engine_id = ? AND next_attempt_at_ms > ?"),
      pending: db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM forget_deliveries"),
      lease: db.prepare<[string, string, number, number], { owner: string }>(
        `INSERT INTO leases (name, owner, until_ms) VALUES (?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
           WHERE leases.owner = excluded.owner OR leases.until_ms <= ?
         RETURNING owner`,
      ),
      expiring: db.prepare<[{ agent: string | null; ex: string; idle: number | null; age: number | null; cutoff: number; n: number }], ExpiringRow>(
        `SELECT session_id, session_key, agent_id, parent_session_id, created_at_ms, updated_at_ms FROM sessions
         WHERE (CASE WHEN @agent IS NULL THEN agent_id NOT IN (SELECT value FROM json_each(@ex)) ELSE agent_id = @agent END)
           AND ((@idle IS NOT NULL AND updated_at_ms <= @cutoff - @idle) OR (@age IS NOT NULL AND created_at_ms <= @cutoff - @age))
         ORDER BY min(coalesce(updated_at_ms + @idle, ${NEVER}), coalesce(created_at_ms + @age, ${NEVER})), session_id
         LIMIT @n`,
      ),
    };
  }

  recordSessionEngine(sessionId: string, engineId: string, atMs: number): void {
    this.s.recordEngine.run(sessionId, engineId, atMs);
  }

  readSessionEngines(sessionId: string): string[] {
    return this.s.engines.all(sessionId).map((r) => r.engine_id);
  }

  /** The deletion, inside the caller's IMMEDIATE transaction (SqliteStore runs it so, and clears its views). */
  deleteTree(sessionId: string, options: DeleteOptions): SessionDeletion | undefined {
    checkTimeMs(options.atMs, "atMs");
    const root = this.s.one.get(sessionId);
    if (!root) return undefined;
    if (options.expectUpdatedAtMs !== undefined && root.updated_at_ms !== options.expectUpdatedAtMs) return undefined;
    const rows = options.keepSubagents ? [root] : [root, ...this.s.tree.all(sessionId).filter((r) => r.session_id !== sessionId)];
    let deliveries = 0;
    for (const r of rows) {
      if (typeof r.search_id === "number") this.s.logSearch.run(LOG_DELETE_SESSION, r.search_id, 0);
      const reason = r.session_id === sessionId ? options.reason : PARENT_DELETED;
      deliveries += this.s.engineCount.get(r.session_id)!.n;
      this.s.deliver.run({ id: r.session_id, key: r.session_key, agent: r.agent_id, reason, at: options.atMs });
      this.s.dropEngines.run(r.session_id);
      this.s.deleteRevisions.run(r.session_id);
      this.s.deleteKeys.run(r.session_id);
      this.s.deleteEntries.run(r.session_id);
      this.s.deleteSession.run(r.session_id);
    }
    return { sessions: rows.map((r) => ({ sessionId: r.session_id, sessionKey: r.session_key, agentId: r.agent_id })), deliveries };
  }

  claim(owner: string, nowMs: number, leaseMs: number, limit: number): ForgetDelivery[] {
    checkTimeMs(nowMs, "nowMs");
    if (!Number.isInteger(limit) || limit <= 0) throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`);
    return this.s.claim.all({ owner, now: nowMs, until: nowMs + leaseMs, n: limit }).map(toDelivery);
  }

  settle(d: ForgetDelivery, owner: string, outcome: ForgetOutcome): boolean {
    if (outcome.done) return this.s.done.run(d.sessionId, d.engineId, owner, d.deletedAtMs).changes > 0;
    return this.s.retry.run(outcome.retryAtMs, outcome.error.slice(0, ERROR_MAX_CHARS), d.sessionId, d.engineId, owner, d.deletedAtMs).changes > 0;
  }

  wake(engineId: string, nowMs: number): number {
    return this.s.wake.run(nowMs, engineId, nowMs).changes;
  }

  pending(): number {
    return this.s.pending.get()!.n;
  }

  tryLease(name: string, owner: string, nowMs: number, ttlMs: number): boolean {
    return this.s.lease.get(name, owner, nowMs + ttlMs, nowMs)?.owner === owner;
  }

  expiring(rule: RetentionRule, cutoffMs: number, limit: number): ExpiringSession[] {
    if (rule.maxIdleMs === undefined && rule.maxAgeMs === undefined) return [];
    const rows = this.s.expiring.all({
      agent: rule.agentId ?? null,
      ex: JSON.stringify(rule.excludeAgents),
      idle: rule.maxIdleMs ?? null,
      age: rule.maxAgeMs ?? null,
      cutoff: cutoffMs,
      n: limit,
    });
    return rows.map((r) => toExpiring(rule, r));
  }
}

function toDelivery(r: DeliveryRow): ForgetDelivery {
  return {
    sessionId: r.session_id,
    engineId: r.engine_id,
    sessionKey: r.session_key,
    agentId: r.agent_id,
    reason: r.reason,
    deletedAtMs: r.deleted_at_ms,
    attempts: r.attempts,
  };
}
