import { InvalidArgumentError, SessionNotFoundError } from "../../contract/errors.js";
import { SubagentEndReason } from "../../contract/gen/contextd/v1/types.js";
import { checkTimeMs, type ExpiredRow, type SubagentStateRow } from "../rows.js";
import { checkEnd } from "../write-checks.js";
import type { ExpiredSubagent, SubagentEnd, SubagentState } from "../types.js";
import { count, run, type PgDatabase } from "./database.js";
import { SQL } from "./statements.js";

// PostgresStore's subagent TTLs, as SqliteStore's (sqlite/subagent-records.ts): an end is recorded
// once, by whoever gets there first. The sweep's claim is one UPDATE over a `FOR UPDATE SKIP LOCKED`
// subquery (statements.ts), so replicas sweeping at the same moment split the expired children
// between them and none is claimed twice.

export async function endSubagentSession(db: PgDatabase, sessionId: string, reason: number, atMs: number): Promise<SubagentEnd> {
  checkEnd(reason, atMs);
  return db.transaction(async (conn) => {
    if ((await run(conn, SQL.endSession, [sessionId, atMs, reason])).length > 0) return { ended: true } as const;
    const [state] = await run<SubagentStateRow>(conn, SQL.subagentState, [sessionId]);
    if (!state) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    return { ended: false, endedAtMs: state.ended_at_ms, reason: state.end_reason } as const;
  });
}

export async function reopenSubagentSession(db: PgDatabase, sessionId: string, atMs: number): Promise<boolean> {
  if (!Number.isSafeInteger(atMs) || atMs <= 0) return false;
  return db.transaction(async (conn) => (await count(conn, SQL.reopenSession, [sessionId, atMs])) > 0);
}

export async function claimExpiredSubagents(db: PgDatabase, nowMs: number, limit: number): Promise<ExpiredSubagent[]> {
  checkTimeMs(nowMs, "nowMs");
  if (!Number.isInteger(limit) || limit <= 0) throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`);
  const rows = await db.transaction((conn) => run<ExpiredRow>(conn, SQL.claimExpired, [nowMs, limit, SubagentEndReason.SUBAGENT_END_REASON_SWEPT]));
  return rows
    .sort((a, b) => a.expires_at_ms - b.expires_at_ms || (a.session_id < b.session_id ? -1 : a.session_id > b.session_id ? 1 : 0))
    .map((r) => ({
      sessionId: r.session_id,
      sessionKey: r.session_key,
      agentId: r.agent_id,
      parentSessionId: r.parent_session_id,
      expiresAtMs: r.expires_at_ms,
    }));
}

export async function readSubagentState(db: PgDatabase, sessionId: string): Promise<SubagentState | undefined> {
  const [r] = await db.read((conn) => run<SubagentStateRow>(conn, SQL.subagentState, [sessionId]));
  return r ? { expiresAtMs: r.expires_at_ms, endedAtMs: r.ended_at_ms, endReason: r.end_reason } : undefined;
}
