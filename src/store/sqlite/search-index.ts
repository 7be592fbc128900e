import fs from "node:fs";

import Database from "better-sqlite3";

import { decodeEntry } from "../rows.js";
import { agentToken, entryIndexText } from "../search-text.js";

// The SQLite store's history-search index (proto/contextd/v1/search.proto; search.ts reads it) and
// the indexer that keeps it, on a thread of its own (search-index-thread.ts).
//
// Why not in the append's transaction: inserting an entry's ~235 words into FTS5, flushing them
// into a segment at commit and cutting the words took ~110 µs a message on the event loop, inside
// the one write transaction every append waits for — a third of batched append throughput
// (docs/performance.md#append_throughput). Now an append writes one row per entry into the store's
// `search_log` (migration 9), in its own transaction, and this indexer applies the log afterwards,
// in order, to an FTS5 table in a file of its own (`<store>-search`): its own write lock, so its
// transactions never hold up an append's.
//
// Exactly once, across crashes: the index file records the last log row it applied (`applied_op`)
// in the same transaction as the index rows that row made, so a crash leaves both or neither; the
// store deletes log rows only at or below that mark, once it is durable (synchronous = FULL here).
// A log row says which entry (or session) changed, never what it holds: the indexer reads the
// entry's current text when it applies the row, so applying the rows in order leaves the index
// holding every entry's current text: an entry deleted since is skipped (its session's deletion
// comes later in the log and deletes the range), an entry rewritten since is indexed as rewritten
// (its rewrite's row, later, deletes and indexes it again).
//
// The file is derived data: when it is missing, belongs to another store (`store_id`, random per
// store, in both files) or is ahead of the store's log (the store was restored from a backup), the
// indexer rebuilds it from the entries, in one transaction over one snapshot of the store.

/** What a log row asks for. */
export const LOG_INDEX = 0;
/** The entry was rewritten: delete its index row, index its current text. */
export const LOG_REINDEX = 1;
/** The session (every seq of its search_id) was deleted. */
export const LOG_DELETE_SESSION = 2;

/** The index file of the store at `storePath`. */
export function searchIndexPath(storePath: string): string {
  return `${storePath}-search`;
}

/**
 * The index's schema, in schema `ix` of a connection. entry_search: rowid (search_id << 32) | seq,
 * `body` the entry's words as search-text.ts cuts them (joined by spaces: the ascii tokenizer splits
 * at spaces only, so FTS5 indexes exactly those words), `agent` the session's agent's token.
 * Contentless: the text is in the entries' payloads already; contentless_delete lets rewrites and
 * deletions remove rows by rowid.
 */
function createSchema(db: Database.Database, ix: string): void {
  db.exec(`
    CREATE VIRTUAL TABLE IF NOT EXISTS ${ix}.entry_search USING fts5(body, agent, content='', contentless_delete=1, tokenize='ascii');
    CREATE TABLE IF NOT EXISTS ${ix}.search_state (
      id         INTEGER PRIMARY KEY CHECK (id = 1),
      store_id   TEXT    NOT NULL,
      applied_op INTEGER NOT NULL
    );
  `);
  // Merge segments 16 at a time instead of 4: a quarter less of the index's CPU per entry (each
  // word is rewritten by fewer merges), for a few more segments for a search to read.
  db.exec(`INSERT INTO ${ix}.entry_search (entry_search, rank) VALUES ('automerge', ${AUTOMERGE})`);
  // A deleted row's postings leave the index's segments at once (FTS5 secure-delete) instead of
  // staying under a tombstone; its terms go at the merge that follows a deletion (SearchIndexer.step).
  db.exec(`INSERT INTO ${ix}.entry_search (entry_search, rank) VALUES ('secure-delete', 1)`);
}

/** FTS5 `automerge` (default 4): see createSchema. */
export const AUTOMERGE = 16;

/**
 * Opens (creating when missing) the index file for the indexer: WAL, every commit synced, the store
 * attached as `src`. A file SQLite cannot read is replaced by a new one (rebuilt from the store).
 */
export function openIndexFile(indexPath: string, storePath: string): Database.Database {
  try {
    return openIndexFileAsIs(indexPath, storePath);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== "SQLITE_CORRUPT" && code !== "SQLITE_NOTADB") throw err;
    for (const f of [indexPath, `${indexPath}-wal`, `${indexPath}-shm`]) fs.rmSync(f, { force: true });
    return openIndexFileAsIs(indexPath, storePath);
  }
}

function openIndexFileAsIs(indexPath: string, storePath: string): Database.Database {
  const db = new Database(indexPath);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.pragma("busy_timeout = 5000");
    db.pragma("secure_delete = ON");
    createSchema(db, "main");
    db.prepare("ATTACH DATABASE ? AS src").run(storePath);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Attaches an in-memory index to the store's own connection (an in-memory store: no other connection can read it). */
export function attachMemoryIndex(db: Database.Database): void {
  db.exec("ATTACH DATABASE ':memory:' AS ix");
  createSchema(db, "ix");
}

interface LogRow {
  op: number;
  kind: number;
  search_id: number;
  seq: number;
}

/**
 * Applies the store's search_log to the index, a bounded step at a time. `db` holds both: the
 * store's schema `src` (read only, never written here) and the index's schema `ix`.
 */
export class SearchIndexer {
  private readonly storeId: Database.Statement<[], { id: string }>;
  private readonly lastLogged: Database.Statement<[], { seq: number }>;
  private readonly state: Database.Statement<[], { store_id: string; applied_op: number }>;
  private readonly lock: Database.Statement;
  private readonly setState: Database.Statement<[string, number]>;
  private readonly log: Database.Statement<[number, number], LogRow>;
  private readonly entry: Database.Statement<[number, number], { payload: Buffer; agent: string }>;
  private readonly sessionEntries: Database.Statement<[number, number, number], { seq: number; payload: Buffer; agent: string }>;
  private readonly insert: Database.Statement<[number, number, string, string]>;
  private readonly remove: Database.Statement<[number, number]>;
  private readonly removeSession: Database.Statement<[number, number]>;
  private readonly clear: Database.Statement;
  private readonly optimize: Database.Statement;
  private readonly sessions: Database.Statement<[], { search_id: number }>;

  constructor(
    private readonly db: Database.Database,
    src: string,
    ix: string,
  ) {
    this.storeId = db.prepare(`SELECT id FROM ${src}.store_identity`);
    this.lastLogged = db.prepare(`SELECT seq FROM ${src}.sqlite_sequence WHERE name = 'search_log'`);
    this.state = db.prepare(`SELECT store_id, applied_op FROM ${ix}.search_state WHERE id = 1`);
    // A write first, so the transaction holds the index's write lock before it reads anything:
    // another indexer on the same file (a second process) waits, then sees this one's applied_op.
    this.lock = db.prepare(`DELETE FROM ${ix}.search_state WHERE id = 0`);
    this.setState = db.prepare(`INSERT OR REPLACE INTO ${ix}.search_state (id, store_id, applied_op) VALUES (1, ?, ?)`);
    this.log = db.prepare(`SELECT op, kind, search_id, seq FROM ${src}.search_log WHERE op > ? ORDER BY op LIMIT ?`);
    this.entry = db.prepare(
      `SELECT e.payload AS payload, s.agent_id AS agent FROM ${src}.sessions s JOIN ${src}.entries e ON e.session_id = s.session_id
       WHERE s.search_id = ? AND e.seq = ?`,
    );
    this.sessionEntries = db.prepare(
      `SELECT e.seq AS seq, e.payload AS payload, s.agent_id AS agent FROM ${src}.sessions s JOIN ${src}.entries e ON e.session_id = s.session_id
       WHERE s.search_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?`,
    );
    this.insert = db.prepare(`INSERT INTO ${ix}.entry_search (rowid, body, agent) VALUES ((? << 32) | ?, ?, ?)`);
    this.remove = db.prepare(`DELETE FROM ${ix}.entry_search WHERE rowid = ((? << 32) | ?)`);
    this.removeSession = db.prepare(`DELETE FROM ${ix}.entry_search WHERE rowid BETWEEN (? << 32) AND ((? << 32) | 4294967295)`);
    this.clear = db.prepare(`DELETE FROM ${ix}.entry_search`);
    this.optimize = db.prepare(`INSERT INTO ${ix}.entry_search (entry_search) VALUES ('optimize')`);
    this.sessions = db.prepare(`SELECT search_id FROM ${src}.sessions WHERE search_id IS NOT NULL ORDER BY search_id`);
  }

  /**
   * Applies up to `maxOps` log rows in one transaction (first rebuilding the index when it is not
   * this store's, or behind a log that was trimmed past it). Answers the log row applied last, and
   * whether rows were left for another step.
   */
  step(maxOps: number): { applied: number; more: boolean } {
    return this.db.transaction(() => {
      this.lock.run();
      const id = this.storeId.get()!.id;
      const last = this.lastLogged.get()?.seq ?? 0;
      const state = this.state.get();
      if (!state || state.store_id !== id || state.applied_op > last) {
        this.rebuild();
        this.setState.run(id, last);
        return { applied: last, more: false };
      }
      const rows = this.log.all(state.applied_op, maxOps);
      for (const r of rows) this.apply(r);
      // A deleted session's words leave the index's segments: FTS5 keeps a deleted row's terms in
      // the segments that hold them (secure-delete empties their postings, the terms stay) until a
      // merge rewrites those segments, so a step that deleted a session merges the index whole.
      // Its cost grows with the index, once per step however many sessions it deleted.
      if (rows.some((r) => r.kind === LOG_DELETE_SESSION)) this.optimize.run();
      const applied = rows.length > 0 ? rows[rows.length - 1].op : state.applied_op;
      if (rows.length > 0) this.setState.run(id, applied);
      return { applied, more: applied < last };
    })();
  }

  private apply(r: LogRow): void {
    if (r.kind === LOG_DELETE_SESSION) {
      this.removeSession.run(r.search_id, r.search_id);
      return;
    }
    if (r.kind === LOG_REINDEX) this.remove.run(r.search_id, r.seq);
    const e = this.entry.get(r.search_id, r.seq);
    if (e) this.index(r.search_id, r.seq, e.payload, e.agent);
  }

  private index(searchId: number, seq: number, payload: Buffer, agent: string): void {
    let body: string;
    try {
      body = entryIndexText(decodeEntry(payload));
    } catch {
      // A payload that no longer decodes (a damaged file) is skipped rather than holding up every
      // entry after it: the store's reads report it.
      return;
    }
    if (body) this.insert.run(searchId, seq, body, agentToken(agent));
  }

  /** Every entry of the store, as of this transaction's snapshot. */
  private rebuild(): void {
    this.clear.run();
    for (const { search_id } of this.sessions.all()) {
      for (let after = 0; ;) {
        const rows = this.sessionEntries.all(search_id, after, 1000);
        if (rows.length === 0) break;
        for (const r of rows) this.index(search_id, r.seq, r.payload, r.agent);
        after = rows[rows.length - 1].seq;
      }
    }
  }
}
