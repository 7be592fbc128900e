import type Database from "better-sqlite3";

import { decodeEntry } from "../rows.js";
import { agentToken, entryIndexText } from "../search-text.js";

/**
 * Versioned schema of the embedded SQLite transcript store.
 *
 * The schema version lives in `PRAGMA user_version`. Migrations are append-only: never edit a
 * migration that has shipped, add a new one with the next version. `migrate` applies every pending
 * migration, and the version bump, in one IMMEDIATE transaction, so a crash leaves the database at
 * the old version or the new one, and two processes opening the same file at once do not both
 * migrate it.
 */
export interface Migration {
  version: number;
  description: string;
  sql: string;
  /** Fills what the SQL made from rows SQL cannot read (protobuf payloads), in the same transaction. */
  backfill?: (db: Database.Database) => void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "sessions and append-only transcript entries",
    sql: `
      CREATE TABLE sessions (
        session_id             TEXT    NOT NULL PRIMARY KEY,
        session_key            TEXT    NOT NULL DEFAULT '',
        agent_id               TEXT    NOT NULL DEFAULT '',
        parent_session_id      TEXT    NOT NULL DEFAULT '',
        created_at_ms          INTEGER NOT NULL,
        updated_at_ms          INTEGER NOT NULL,
        entry_count            INTEGER NOT NULL DEFAULT 0,
        message_count          INTEGER NOT NULL DEFAULT 0,
        compaction_count       INTEGER NOT NULL DEFAULT 0,
        -- tokens of every message ever appended (summaries not included)
        total_tokens           INTEGER NOT NULL DEFAULT 0,
        last_seq               INTEGER NOT NULL DEFAULT 0,
        last_entry_id          TEXT    NOT NULL DEFAULT '',
        -- derived active-view pointers: readActiveView reads the session row, the latest
        -- compaction entry by (session_id, latest_compaction_seq), then the range
        -- seq >= active_from_seq; it never scans history before the active view
        -- (migration 5 adds the pinned system messages before it, through a partial index)
        latest_compaction_id   TEXT    NOT NULL DEFAULT '',
        latest_compaction_seq  INTEGER NOT NULL DEFAULT 0,
        active_from_seq        INTEGER NOT NULL DEFAULT 1,
        active_summary_tokens  INTEGER NOT NULL DEFAULT 0,
        system_addition_tokens INTEGER NOT NULL DEFAULT 0
      );

      CREATE INDEX sessions_by_activity ON sessions (updated_at_ms DESC, session_id ASC);

      CREATE TABLE entries (
        session_id   TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        seq          INTEGER NOT NULL CHECK (seq >= 1),
        id           TEXT    NOT NULL,
        parent_id    TEXT    NOT NULL DEFAULT '',
        kind         TEXT    NOT NULL CHECK (kind IN ('message', 'compaction', 'custom')),
        -- Role of a message entry; NULL for compaction and custom entries
        role         INTEGER,
        -- message entries: the message's tokens; compaction entries: the summary's tokens
        token_count  INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),
        timestamp_ms INTEGER NOT NULL,
        -- TranscriptEntry.encode(entry).finish(): the entry exactly as it is returned
        payload      BLOB    NOT NULL,
        PRIMARY KEY (session_id, seq)
      );

      CREATE UNIQUE INDEX entries_by_id ON entries (session_id, id);
    `,
  },
  {
    version: 2,
    description: "previous revisions of rewritten entries; engine registrations and quarantine records",
    sql: `
      -- One row per replaced revision of a message entry (HostService.RewriteTranscriptEntries).
      -- The live revision stays in entries; this keeps what it replaced.
      CREATE TABLE entry_revisions (
        session_id     TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        entry_id       TEXT    NOT NULL,
        -- the revision that was replaced (TranscriptEntry.revision of payload)
        revision       INTEGER NOT NULL CHECK (revision >= 0),
        token_count    INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),
        replaced_at_ms INTEGER NOT NULL,
        reason         TEXT    NOT NULL DEFAULT '',
        -- TranscriptEntry.encode(entry).finish() of the replaced revision
        payload        BLOB    NOT NULL,
        PRIMARY KEY (session_id, entry_id, revision)
      );

      -- Who owns each engine id, so ownership survives a restart.
      CREATE TABLE engine_registrations (
        engine_id        TEXT    NOT NULL PRIMARY KEY,
        owner            TEXT    NOT NULL,
        endpoint         TEXT    NOT NULL DEFAULT '',
        -- EngineInfo.encode(info).finish()
        info             BLOB    NOT NULL,
        protocol_version INTEGER NOT NULL DEFAULT 0,
        registered_at_ms INTEGER NOT NULL
      );

      -- Quarantine records, persisted so that a quarantine survives a restart.
      CREATE TABLE engine_quarantines (
        engine_id     TEXT    NOT NULL PRIMARY KEY,
        -- QuarantineState.encode(state).finish()
        payload       BLOB    NOT NULL,
        updated_at_ms INTEGER NOT NULL
      );
    `,
  },
  {
    version: 3,
    description: "entry trees of imported files (hidden entries, the file header) and idempotency keys",
    sql: `
      -- 1 for an entry that is never part of the active view: on a branch an imported file left,
      -- dropped by an imported reset, or a message the runtime excluded from context.
      ALTER TABLE entries ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0 CHECK (hidden IN (0, 1));
      -- The header line of the file an imported session came from ('' otherwise), for export.
      ALTER TABLE sessions ADD COLUMN header_json TEXT NOT NULL DEFAULT '';

      -- AppendMessagesRequest.idempotency_key: one row per key a session has seen, written in the
      -- transaction of the append it answers, kept as long as the session.
      CREATE TABLE idempotency_keys (
        session_id      TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        idempotency_key TEXT    NOT NULL,
        -- digest of the request's messages and is_heartbeat (src/host/append-digest.ts)
        request_hash    TEXT    NOT NULL,
        -- JSON arrays: the entry ids and token counts the first request was answered with
        entry_ids       TEXT    NOT NULL,
        token_counts    TEXT    NOT NULL,
        created_at_ms   INTEGER NOT NULL,
        PRIMARY KEY (session_id, idempotency_key)
      );
    `,
  },
  {
    version: 4,
    description: "subagent TTLs: when a child session expires, and when (and why) it ended",
    sql: `
      -- PrepareSubagentSpawn's ttl_ms as an absolute time (0: no TTL). The sweep claims sessions
      -- whose time passed and that have not ended (src/host/subagent-sweeper.ts).
      ALTER TABLE sessions ADD COLUMN expires_at_ms INTEGER NOT NULL DEFAULT 0;
      -- When the subagent ended (EndSubagent, or the sweep; 0: it has not), and the
      -- SubagentEndReason. Set once: the engine hears OnSubagentEnded once per child.
      ALTER TABLE sessions ADD COLUMN ended_at_ms INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE sessions ADD COLUMN end_reason INTEGER NOT NULL DEFAULT 0;

      -- What the sweep reads: only children with a TTL that are still running.
      CREATE INDEX sessions_expiring ON sessions (expires_at_ms) WHERE expires_at_ms > 0 AND ended_at_ms = 0;
    `,
  },
  {
    version: 5,
    description: "pinned system messages: a partial index on a session's system message entries by seq",
    sql: `
      -- docs/pinned-messages.md: the active view holds every non-hidden system message entry from
      -- before its cut (role 4 = ROLE_SYSTEM, the wire value). readActiveView and readActiveTotals
      -- read them through this index, which holds only those entries: the read costs the number of
      -- system messages, never the length of the history before the cut.
      CREATE INDEX entries_pinned ON entries (session_id, seq) WHERE kind = 'message' AND role = 4 AND hidden = 0;
    `,
  },
  {
    version: 6,
    description: "message keys: a runtime's identity of each message, unique in its session; where the session's messages end",
    sql: `
      -- AppendMessagesRequest.message_keys: a message whose key its session already holds is not
      -- stored again. NULL for a message without a key (and every other entry).
      ALTER TABLE entries ADD COLUMN message_key TEXT;
      CREATE UNIQUE INDEX entries_by_message_key ON entries (session_id, message_key) WHERE message_key IS NOT NULL;
      -- SessionInfo.last_message_key / last_message_timestamp_ms, kept by every write that adds a
      -- message entry (so GetSession reads no entries for them).
      ALTER TABLE sessions ADD COLUMN last_message_key TEXT NOT NULL DEFAULT '';
      ALTER TABLE sessions ADD COLUMN last_message_timestamp_ms INTEGER NOT NULL DEFAULT 0;
      UPDATE sessions SET last_message_timestamp_ms = coalesce((
        SELECT e.timestamp_ms FROM entries e
        WHERE e.session_id = sessions.session_id AND e.kind = 'message' ORDER BY e.seq DESC LIMIT 1), 0);
    `,
  },
  {
    version: 7,
    description: "engine instances: many sidecars per engine id, each with its own quarantine record",
    sql: `
      -- docs/registry.md, "Instances". engine_registrations stays the id's owner and its most recent
      -- instance; every live instance has a row here. No foreign key: a replica older than
      -- instances deletes the engine row alone, and a row without its engine row is ignored.
      CREATE TABLE engine_instances (
        engine_id        TEXT    NOT NULL,
        instance_id      TEXT    NOT NULL,
        endpoint         TEXT    NOT NULL DEFAULT '',
        -- Locality.encode(locality).finish()
        locality         BLOB    NOT NULL DEFAULT x'',
        -- EngineInfo.encode(info).finish()
        info             BLOB    NOT NULL,
        protocol_version INTEGER NOT NULL DEFAULT 0,
        registered_at_ms INTEGER NOT NULL,
        PRIMARY KEY (engine_id, instance_id)
      );
      -- Every registration so far is one instance, named by its endpoint.
      INSERT INTO engine_instances (engine_id, instance_id, endpoint, info, protocol_version, registered_at_ms)
        SELECT engine_id, endpoint, endpoint, info, protocol_version, registered_at_ms FROM engine_registrations WHERE endpoint <> '';

      -- One instance's quarantine; engine_quarantines keeps the engine-wide ones (an operator's).
      CREATE TABLE engine_instance_quarantines (
        engine_id     TEXT    NOT NULL,
        instance_id   TEXT    NOT NULL,
        -- QuarantineState.encode(state).finish()
        payload       BLOB    NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (engine_id, instance_id)
      );
    `,
  },
  {
    version: 8,
    description: "history search: a full-text index of every entry's text (FTS5, contentless-delete)",
    sql: `
      -- The session's number in the search index: an entry's index row is (search_id << 32) | seq,
      -- so that one session's rows are one rowid range (a session's search reads only its range,
      -- DeleteSession deletes it). Assigned at insert (max + 1); the backfill numbers existing ones.
      ALTER TABLE sessions ADD COLUMN search_id INTEGER;
      -- History search (proto/contextd/v1/search.proto, src/store/sqlite/search.ts): the words of
      -- each message's text and each compaction's summary (src/store/search-text.ts cuts them, the
      -- same for both stores; body holds them joined by spaces), and the agent's token (agent), so
      -- that an agent-wide search intersects in the index. Contentless: the text is in the entries'
      -- payloads already, and hits are decoded from there; contentless_delete lets a rewrite or a
      -- deletion remove rows by rowid. Written in the transaction of every write of entries. The
      -- ascii tokenizer splits body at its spaces only (the words are lower-cased letters and digits
      -- already, any non-ASCII ones kept whole), so FTS5 indexes exactly search-text.ts's words.
      CREATE VIRTUAL TABLE entry_search USING fts5(body, agent, content='', contentless_delete=1, tokenize='ascii');
    `,
    backfill: backfillSearchIndex,
  },
  {
    version: 9,
    description: "history search indexed after the append: a log of what to index, the index in a file of its own",
    sql: `
      -- The index moves to <store>-search, kept by an indexer beside the event loop
      -- (src/store/sqlite/search-index.ts says why and how): it is rebuilt there from the entries.
      DROP TABLE entry_search;
      -- What the indexer is to apply, in order: kind 0 index the entry (search_id, seq), 1 index it
      -- again (rewritten), 2 delete the session's rows (search_id). Written in the transaction of
      -- every write of entries; deleted once the index has applied it. AUTOINCREMENT: an op number
      -- is never reused, so the index's mark of the last op it applied stays meaningful.
      CREATE TABLE search_log (
        op        INTEGER PRIMARY KEY AUTOINCREMENT,
        kind      INTEGER NOT NULL,
        search_id INTEGER NOT NULL,
        seq       INTEGER NOT NULL
      );
      -- This store's identity, recorded in its index file too: an index file of another store
      -- (a copied file, a restored backup) is rebuilt rather than trusted.
      CREATE TABLE store_identity (id TEXT NOT NULL);
      INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(16))));
    `,
  },
  {
    version: 10,
    description: "deletion that reaches every engine: the engines that served each session, durable forget deliveries, leases",
    sql: `
      -- Every engine called for a session (src/store/deletions.ts): a deletion sends ForgetSession
      -- to each. Removed with the session.
      CREATE TABLE session_engines (
        session_id  TEXT    NOT NULL,
        engine_id   TEXT    NOT NULL,
        first_at_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, engine_id)
      ) WITHOUT ROWID;
      -- One ForgetSession to deliver: written in the deletion's transaction, removed when the engine
      -- acknowledges. The lease says which replica is delivering it (src/host/forget-delivery.ts).
      CREATE TABLE forget_deliveries (
        session_id         TEXT    NOT NULL,
        engine_id          TEXT    NOT NULL,
        session_key        TEXT    NOT NULL,
        agent_id           TEXT    NOT NULL,
        reason             INTEGER NOT NULL,
        deleted_at_ms      INTEGER NOT NULL,
        attempts           INTEGER NOT NULL DEFAULT 0,
        next_attempt_at_ms INTEGER NOT NULL,
        lease_owner        TEXT    NOT NULL DEFAULT '',
        lease_until_ms     INTEGER NOT NULL DEFAULT 0,
        last_error         TEXT    NOT NULL DEFAULT '',
        PRIMARY KEY (session_id, engine_id)
      );
      CREATE INDEX forget_deliveries_due ON forget_deliveries (next_attempt_at_ms);
      CREATE INDEX forget_deliveries_by_engine ON forget_deliveries (engine_id);
      -- Named leases: one replica at a time runs the loop that holds one (the retention sweep).
      CREATE TABLE leases (
        name     TEXT    NOT NULL PRIMARY KEY,
        owner    TEXT    NOT NULL,
        until_ms INTEGER NOT NULL
      );
      -- A deletion takes a session's subagent children with it; the retention sweep finds sessions
      -- by creation as well as by activity.
      CREATE INDEX sessions_by_parent ON sessions (parent_session_id) WHERE parent_session_id <> '';
      CREATE INDEX sessions_by_created ON sessions (created_at_ms);
    `,
  },
  {
    version: 11,
    description: "the audit trail and the engine id reservations the configuration last had",
    sql: `
      -- One row per operator or owner action (src/store/audit-records.ts): ids only, never content.
      CREATE TABLE audit_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms      INTEGER NOT NULL,
        actor      TEXT    NOT NULL,
        action     TEXT    NOT NULL,
        target     TEXT    NOT NULL,
        peer       TEXT    NOT NULL,
        outcome    TEXT    NOT NULL,
        method     TEXT    NOT NULL,
        request_id TEXT    NOT NULL
      );
      CREATE INDEX audit_events_by_time ON audit_events (at_ms);
      -- What auth.owners.<owner>.engines said when a contextd last started: a start whose
      -- configuration differs records the changes in audit_events (syncReservations).
      CREATE TABLE config_reservations (
        engine_id TEXT NOT NULL PRIMARY KEY,
        owner     TEXT NOT NULL
      );
    `,
  },
  {
    version: 12,
    description: "bytes each session holds, kept by triggers, for the per-agent quotas",
    sql: `
      ALTER TABLE sessions ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
      UPDATE sessions SET stored_bytes =
        (SELECT coalesce(sum(length(payload)), 0) FROM entries e WHERE e.session_id = sessions.session_id) +
        (SELECT coalesce(sum(length(payload)), 0) FROM entry_revisions r WHERE r.session_id = sessions.session_id);
      -- Every write path (appends, imports, forks, compactions, rewrites, a store copy) inserts or
      -- updates these rows; the session row goes with its entries, so deletes need no trigger.
      CREATE TRIGGER entries_stored_bytes_insert AFTER INSERT ON entries BEGIN
        UPDATE sessions SET stored_bytes = stored_bytes + length(NEW.payload) WHERE session_id = NEW.session_id;
      END;
      CREATE TRIGGER entries_stored_bytes_update AFTER UPDATE OF payload ON entries BEGIN
        UPDATE sessions SET stored_bytes = stored_bytes + length(NEW.payload) - length(OLD.payload) WHERE session_id = NEW.session_id;
      END;
      CREATE TRIGGER revisions_stored_bytes_insert AFTER INSERT ON entry_revisions BEGIN
        UPDATE sessions SET stored_bytes = stored_bytes + length(NEW.payload) WHERE session_id = NEW.session_id;
      END;
      CREATE INDEX sessions_by_agent ON sessions (agent_id);
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/**
 * Brings the database to `target` (SCHEMA_VERSION unless a test asks for an older schema, e.g. to
 * build a version-1 file and check the upgrade). Returns the version it found.
 */
export function migrate(db: Database.Database, target: number = SCHEMA_VERSION): number {
  if (!MIGRATIONS.some((m) => m.version === target)) {
    throw new Error(`unknown transcript store schema version ${target}`);
  }
  const apply = db.transaction((): number => {
    const found = db.pragma("user_version", { simple: true }) as number;
    if (found > SCHEMA_VERSION) {
      throw new Error(
        `transcript store schema version ${found} is newer than this contextd supports (${SCHEMA_VERSION}); ` +
          "upgrade contextd or point it at another database",
      );
    }
    for (const m of MIGRATIONS) {
      if (m.version <= found || m.version > target) continue;
      db.exec(m.sql);
      m.backfill?.(db);
      db.pragma(`user_version = ${m.version}`);
    }
    return found;
  });
  return apply.immediate();
}

/**
 * Migration 8's backfill: numbers the sessions (oldest first) and indexes every entry. One pass
 * over the entries, in the migration's transaction: an existing store is searchable once it opens.
 */
function backfillSearchIndex(db: Database.Database): void {
  const number = db.prepare("UPDATE sessions SET search_id = ? WHERE session_id = ?");
  const sessions = db.prepare("SELECT session_id AS id, agent_id AS agent FROM sessions ORDER BY created_at_ms, session_id").all() as {
    id: string;
    agent: string;
  }[];
  sessions.forEach((s, i) => number.run(i + 1, s.id));
  db.exec("CREATE UNIQUE INDEX sessions_by_search_id ON sessions (search_id)");
  const index = db.prepare("INSERT INTO entry_search (rowid, body, agent) VALUES ((? << 32) | ?, ?, ?)");
  const window = db.prepare("SELECT seq, payload FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 1000");
  sessions.forEach((s, i) => {
    const agent = agentToken(s.agent);
    for (let after = 0; ;) {
      const rows = window.all(s.id, after) as { seq: number; payload: Buffer }[];
      if (rows.length === 0) break;
      for (const r of rows) {
        const body = entryIndexText(decodeEntry(r.payload));
        if (body) index.run(i + 1, r.seq, body, agent);
      }
      after = rows[rows.length - 1].seq;
    }
  });
}
