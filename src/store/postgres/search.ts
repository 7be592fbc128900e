import { SessionNotFoundError } from "../../contract/errors.js";
import type { TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type pg from "pg";

import { run, type Conn, type PgDatabase, type Statement } from "./database.js";
import { decodeEntry, type SessionRow } from "./rows.js";
import { tsqueryLiteral } from "../search-text.js";
import { SQL } from "./statements.js";
import type { SearchCandidate, StoreSearch } from "../types.js";

// PostgresStore's history search over entries.search (migration 7): a tsvector of the entry's words
// as search-text.ts cuts them, matched by a tsquery literal of the query's phrases — words are
// letters and digits only, so no user text is ever tsquery syntax, and no parser or dictionary
// enters (the SQLite store matches the same words). One read-only statement per search.

const NO_SEQ_BOUND = Number.MAX_SAFE_INTEGER;

/**
 * A search statement, unprepared: planned for each query's own tsquery, so that the planner weighs
 * the words' frequencies (the column's statistics) — a rare word through the GIN index, a common
 * one by walking the session's seqs backwards. A prepared statement soon runs one generic plan for
 * every query, and the session walk it picks costs a rare word the whole session (~200 ms at 100k
 * entries, where a custom plan takes ~2 ms).
 */
async function unprepared<R extends pg.QueryResultRow>(conn: Conn, stmt: Statement, values: unknown[]): Promise<R[]> {
  return (await conn.query<R>(stmt.text, values)).rows;
}

export async function searchCandidates(db: PgDatabase, search: StoreSearch): Promise<SearchCandidate[]> {
  const q = tsqueryLiteral(search.terms);
  const n = Math.max(1, Math.floor(search.limit));
  return db.read(async (conn) => {
    const [session] = await run<SessionRow>(conn, SQL.session, [search.sessionId]);
    if (!session) throw new SessionNotFoundError(search.sessionId, `session ${search.sessionId} not found`);
    if (search.agentId === undefined) {
      const before = search.after ? search.after.seq : NO_SEQ_BOUND;
      const rows = await unprepared<{ seq: number; payload: Buffer }>(conn, SQL.searchSession, [session.session_id, q, before, n]);
      return rows.map((r) => ({ sessionId: session.session_id, createdAtMs: session.created_at_ms, seq: r.seq, payload: r.payload }));
    }
    const a = search.after;
    const rows = await unprepared<{ session_id: string; created_at_ms: number; seq: number; payload: Buffer }>(conn, SQL.searchAgent, [
      search.agentId,
      q,
      a ? a.createdAtMs : null,
      a?.sessionId ?? "",
      a?.seq ?? 0,
      n,
    ]);
    return rows.map((r) => ({ sessionId: r.session_id, createdAtMs: r.created_at_ms, seq: r.seq, payload: r.payload }));
  });
}

export async function readEntryById(db: PgDatabase, sessionId: string, entryId: string): Promise<TranscriptEntry | undefined> {
  return db.read(async (conn) => {
    const [row] = await run<{ payload: Buffer }>(conn, SQL.entryPayloadById, [sessionId, entryId]);
    if (!row && (await run(conn, SQL.sessionExists, [sessionId])).length === 0) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    return row ? decodeEntry(row.payload) : undefined;
  });
}

export async function readPreviousCompaction(db: PgDatabase, sessionId: string, beforeSeq: number): Promise<TranscriptEntry | undefined> {
  const [row] = await db.read((conn) => run<{ payload: Buffer }>(conn, SQL.previousCompaction, [sessionId, beforeSeq]));
  return row ? decodeEntry(row.payload) : undefined;
}
