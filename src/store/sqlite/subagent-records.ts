import type Database from "better-sqlite3";

import { InvalidArgumentError, SessionNotFoundError } from "../../contract/errors.js";
import { SubagentEndReason } from "../../contract/gen/contextd/v1/types.js";
import type { ExpiredSubagent, SubagentEnd, SubagentState } from "../types.js";
import { checkTimeMs } from "../rows.js";
import type { Statements } from "./statements.js";
import { checkEnd } from "../write-checks.js";

// SqliteStore's subagent TTLs (migration 4): when a child session expires and when it ended. An end
// is recorded once (`ended_at_ms = 0` in every UPDATE's WHERE), so whoever records it — EndSubagent
// or the sweep — is the one that tells the engine. The sweep's claim runs in one IMMEDIATE
// transaction: the write lock is taken before the read, so two processes on one file (or two
// stores in one process) never claim the same child.

export function endSubagentSession(db: Database.Database, stmts: Statements, sessionId: string, reason: number, atMs: number): SubagentEnd {
  checkEnd(reason, atMs);
  const run = db.transaction((): SubagentEnd => {
    const state = stmts.subagentState.get(sessionId);
    if (!state) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    if (state.ended_at_ms !== 0) return { ended: false, endedAtMs: state.ended_at_ms, reason: state.end_reason };
    stmts.endSession.run(atMs, reason, sessionId);
    return { ended: true };
  });
  return run.immediate();
}

export function reopenSubagentSession(stmts: Statements, sessionId: string, atMs: number): boolean {
  if (!Number.isSafeInteger(atMs) || atMs <= 0) return false;
  return stmts.reopenSession.run(sessionId, atMs).changes > 0;
}

export function claimExpiredSubagents(db: Database.Database, stmts: Statements, nowMs: number, limit: number): ExpiredSubagent[] {
  checkTimeMs(nowMs, "nowMs");
  if (!Number.isInteger(limit) || limit <= 0) throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`);
  const run = db.transaction((): ExpiredSubagent[] => {
    const rows = stmts.expiredSessions.all(nowMs, limit);
    for (const r of rows) stmts.endSession.run(nowMs, SubagentEndReason.SUBAGENT_END_REASON_SWEPT, r.session_id);
    return rows.map((r) => ({
      sessionId: r.session_id,
      sessionKey: r.session_key,
      agentId: r.agent_id,
      parentSessionId: r.parent_session_id,
      expiresAtMs: r.expires_at_ms,
    }));
  });
  return run.immediate();
}

export function readSubagentState(stmts: Statements, sessionId: string): SubagentState | undefined {
  const r = stmts.subagentState.get(sessionId);
  return r ? { expiresAtMs: r.expires_at_ms, endedAtMs: r.ended_at_ms, endReason: r.end_reason } : undefined;
}
