import type Database from "better-sqlite3";

import { SessionNotFoundError } from "../../contract/errors.js";
import type { TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import { decodeEntry } from "../rows.js";
import { agentToken, fts5Match } from "../search-text.js";
import type { SearchCandidate, StoreSearch } from "../types.js";
import type { SearchIndexing } from "./search-index-thread.js";
import type { Statements } from "./statements.js";

// SqliteStore's history search over the FTS5 index (search-index.ts: entry_search, rowid
// (search_id << 32) | seq, `body` the entry's words, `agent` its agent's token), in schema `ix` of
// the connection the search reads with (the store's in `main`). A session's search is a rowid range
// of the index, read backwards (NEWEST order is rowid order there), so it costs the session's
// matches only; an agent's search intersects with the agent's token in the index and is sorted by
// session. The MATCH expression is built from words alone (search-text.ts fts5Match): no user text
// is ever FTS5 syntax. The entries are then read by (session_id, seq).
//
// Every search first waits for the indexer to apply the search log as it stood when the search
// began (search-index-thread.ts), so what was appended before is found.

const SEQ_MASK = 4294967295;

export class SqliteSearch {
  private readonly inSession: Database.Statement<[{ q: string; sid: number; hi: number; n: number }], { seq: number }>;
  private readonly inAgent: Database.Statement<
    [{ q: string; agent: string; c: number | null; s: string; seq: number; n: number }],
    { sessionId: string; createdAtMs: number; seq: number }
  >;
  private readonly session: Database.Statement<[string], { session_id: string; created_at_ms: number; search_id: number | null }>;
  private readonly entryBySeq: Database.Statement<[string, number], { payload: Buffer }>;

  /**
   * `db` and `stmts` are the store's own connection's; `reader` reads the store (schema main) and
   * the index (schema ix) — the same connection for an in-memory store; `indexing` is waited for.
   */
  constructor(
    private readonly db: Database.Database,
    private readonly reader: Database.Database,
    private readonly stmts: Statements,
    private readonly indexing: SearchIndexing,
  ) {
    this.inSession = reader.prepare(
      `SELECT rowid & ${SEQ_MASK} AS seq FROM ix.entry_search
       WHERE entry_search MATCH @q AND rowid BETWEEN (@sid << 32) AND ((@sid << 32) | @hi)
       ORDER BY rowid DESC LIMIT @n`,
    );
    this.inAgent = reader.prepare(
      `SELECT s.session_id AS sessionId, s.created_at_ms AS createdAtMs, f.rowid & ${SEQ_MASK} AS seq
       FROM ix.entry_search f JOIN main.sessions s ON s.search_id = (f.rowid >> 32)
       WHERE f.entry_search MATCH @q AND s.agent_id = @agent
         AND (@c IS NULL OR s.created_at_ms < @c
              OR (s.created_at_ms = @c AND (s.session_id > @s OR (s.session_id = @s AND (f.rowid & ${SEQ_MASK}) < @seq))))
       ORDER BY s.created_at_ms DESC, s.session_id ASC, seq DESC LIMIT @n`,
    );
    this.session = reader.prepare("SELECT session_id, created_at_ms, search_id FROM main.sessions WHERE session_id = ?");
    this.entryBySeq = reader.prepare("SELECT payload FROM main.entries WHERE session_id = ? AND seq = ?");
  }

  /** TranscriptStore.searchCandidates: once the index holds what was logged before, one deferred transaction (one snapshot). */
  async candidates(search: StoreSearch): Promise<SearchCandidate[]> {
    await this.indexing.caughtUp(this.stmts.lastLogged.get()?.seq ?? 0);
    return this.reader.transaction((): SearchCandidate[] => {
      const session = this.session.get(search.sessionId);
      if (!session) throw new SessionNotFoundError(search.sessionId, `session ${search.sessionId} not found`);
      const n = Math.max(1, Math.floor(search.limit));
      if (search.agentId === undefined) {
        const sid = session.search_id;
        if (typeof sid !== "number") return [];
        const hi = search.after ? Math.max(0, search.after.seq - 1) : SEQ_MASK;
        const rows = this.inSession.all({ q: fts5Match(search.terms), sid, hi, n });
        return rows.flatMap((r) => this.candidate(session.session_id, session.created_at_ms, r.seq));
      }
      const q = `agent : "${agentToken(search.agentId)}" AND ${fts5Match(search.terms)}`;
      const a = search.after;
      const rows = this.inAgent.all({ q, agent: search.agentId, c: a?.createdAtMs ?? null, s: a?.sessionId ?? "", seq: a?.seq ?? 0, n });
      return rows.flatMap((r) => this.candidate(r.sessionId, r.createdAtMs, r.seq));
    })();
  }

  private candidate(sessionId: string, createdAtMs: number, seq: number): SearchCandidate[] {
    const row = this.entryBySeq.get(sessionId, seq);
    return row ? [{ sessionId, createdAtMs, seq, payload: row.payload }] : [];
  }

  entryById(sessionId: string, entryId: string): TranscriptEntry | undefined {
    return this.db.transaction(() => {
      const row = this.stmts.sessionEntryById.get(sessionId, entryId);
      if (!row && !this.stmts.session.get(sessionId)) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
      return row ? decodeEntry(row.payload) : undefined;
    })();
  }

  previousCompaction(sessionId: string, beforeSeq: number): TranscriptEntry | undefined {
    const row = this.stmts.previousCompaction.get(sessionId, beforeSeq);
    return row ? decodeEntry(row.payload) : undefined;
  }
}
