/**
 * The lossless engine's SQLite schema, and opening a database with the durability it relies on.
 *
 * Durability: WAL with `synchronous = FULL`, so an answered Ingest or a committed summary survives
 * kill -9 and power loss. The schema version lives in `PRAGMA user_version`; a database written by
 * a newer version of the engine is refused rather than misread.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";

export const SCHEMA_VERSION = 2;

const SCHEMA_V1 = `
-- One row per session the engine has seen.
CREATE TABLE IF NOT EXISTS sessions (
  session_id       TEXT PRIMARY KEY,
  created_at_ms    INTEGER NOT NULL,
  -- The id of the host's latest compaction entry when we last read the transcript: a different one
  -- in an active view means the host compacted on its own (e.g. legacy served while we were down).
  host_summary_id  TEXT NOT NULL DEFAULT '',
  -- Summary ids are S1, S2, … per session.
  next_summary_no  INTEGER NOT NULL DEFAULT 1
);

-- Every message, verbatim, keyed by the host's entry id (ingest is idempotent on it).
CREATE TABLE IF NOT EXISTS messages (
  session_id     TEXT NOT NULL,
  entry_id       TEXT NOT NULL,
  ord            INTEGER NOT NULL,          -- position in the history, 1-based
  role           INTEGER NOT NULL,          -- contextd.v1.Role
  token_count    INTEGER NOT NULL,          -- the host's count
  tool_call_ids  TEXT NOT NULL DEFAULT '[]', -- JSON: ids of the calls an assistant message makes
  tool_call_id   TEXT NOT NULL DEFAULT '',  -- the call a tool result answers
  body           TEXT NOT NULL,             -- the Message as proto3 JSON
  ingested_at_ms INTEGER NOT NULL,
  PRIMARY KEY (session_id, entry_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_by_ord ON messages (session_id, ord);

-- The summary DAG. Leaves cover [first_ord, last_ord] of messages; condensed summaries list their
-- children. parent_id is set when a summary is condensed; roots have none. Rows are never deleted.
CREATE TABLE IF NOT EXISTS summaries (
  session_id     TEXT NOT NULL,
  summary_id     TEXT NOT NULL,
  depth          INTEGER NOT NULL,
  first_ord      INTEGER NOT NULL,
  last_ord       INTEGER NOT NULL,
  first_entry_id TEXT NOT NULL,
  last_entry_id  TEXT NOT NULL,
  message_count  INTEGER NOT NULL,
  source_tokens  INTEGER NOT NULL,
  child_ids      TEXT NOT NULL,             -- JSON array, oldest first; [] for a leaf
  parent_id      TEXT,
  text           TEXT NOT NULL,
  token_count    INTEGER NOT NULL,          -- of the rendered summary message
  summarizer     TEXT NOT NULL,
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (session_id, summary_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS summaries_by_span ON summaries (session_id, first_ord);
`;

// Version 2: pinned system messages (docs/pinned-messages.md). Assembly reads every system message
// of a session (role 4 = ROLE_SYSTEM, the wire value) to put them first; this index holds only
// those, so that read does not grow with the session's history.
const SCHEMA_V2 = `
CREATE INDEX IF NOT EXISTS messages_system ON messages (session_id, ord) WHERE role = 4;
`;

/** Each version's DDL, applied in order to bring an older file up to SCHEMA_VERSION. */
const MIGRATIONS: ReadonlyArray<[version: number, sql: string]> = [
  [1, SCHEMA_V1],
  [2, SCHEMA_V2],
];

/** Opens (creating when needed) the database at `file`, or `:memory:` for tests. */
export function openDatabase(file: string): Database.Database {
  if (file !== ":memory:") fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const db = new Database(file);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.pragma("busy_timeout = 5000");
    // A forgotten session's text is overwritten where it was, not only unlinked (ForgetSession).
    db.pragma("secure_delete = ON");
    const found = db.pragma("user_version", { simple: true }) as number;
    if (found > SCHEMA_VERSION) {
      throw new Error(`lossless: ${file} has schema version ${found}; this engine understands up to ${SCHEMA_VERSION}`);
    }
    if (found < SCHEMA_VERSION) {
      db.transaction(() => {
        for (const [version, sql] of MIGRATIONS) if (version > found) db.exec(sql);
        db.pragma(`user_version = ${SCHEMA_VERSION}`);
      })();
    }
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}
