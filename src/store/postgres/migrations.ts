import { FailedPreconditionError } from "../../contract/errors.js";
import type { Conn, PgDatabase } from "./database.js";
import { decodeEntry } from "../rows.js";
import { entryIndexText } from "../search-text.js";

/**
 * Versioned schema of the PostgreSQL store: the same tables and columns as the SQLite store
 * (sqlite/migrations.ts explains each), in PostgreSQL's types.
 *
 * Applied versions are rows of `contextd_schema_migrations`. Migrations are append-only: never edit
 * one that has shipped, add a new one with the next version. `migrate` runs every pending
 * migration and records it in one transaction that first takes a transaction-scoped advisory lock,
 * so replicas starting at once against one database queue behind the first: it migrates, the others
 * then find nothing to do. A crash leaves the database at the old version or the new one.
 *
 * Identifiers are `COLLATE "C"`, so that they compare and sort by code point as in SQLite (a
 * database's default collation may be linguistic), which keeps listSessions' order and cursors
 * identical in both stores.
 */
export interface Migration {
  version: number;
  description: string;
  sql: string;
  /** Fills what the SQL made from rows SQL cannot read (protobuf payloads), in the same transaction. */
  backfill?: (conn: Conn) => Promise<void>;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "sessions, transcript entries and their revisions, idempotency keys, engine registrations and quarantines",
    sql: `
      CREATE TABLE sessions (
        session_id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        session_key            TEXT   NOT NULL DEFAULT '',
        agent_id               TEXT   NOT NULL DEFAULT '',
        parent_session_id      TEXT   NOT NULL DEFAULT '',
        created_at_ms          BIGINT NOT NULL,
        updated_at_ms          BIGINT NOT NULL,
        entry_count            BIGINT NOT NULL DEFAULT 0,
        message_count          BIGINT NOT NULL DEFAULT 0,
        compaction_count       BIGINT NOT NULL DEFAULT 0,
        total_tokens           BIGINT NOT NULL DEFAULT 0,
        last_seq               BIGINT NOT NULL DEFAULT 0,
        last_entry_id          TEXT   NOT NULL DEFAULT '',
        -- derived active-view pointers (see the SQLite schema)
        latest_compaction_id   TEXT   NOT NULL DEFAULT '',
        latest_compaction_seq  BIGINT NOT NULL DEFAULT 0,
        active_from_seq        BIGINT NOT NULL DEFAULT 1,
        active_summary_tokens  BIGINT NOT NULL DEFAULT 0,
        system_addition_tokens BIGINT NOT NULL DEFAULT 0,
        header_json            TEXT   NOT NULL DEFAULT ''
      );

      CREATE INDEX sessions_by_activity ON sessions (updated_at_ms DESC, session_id ASC);

      CREATE TABLE entries (
        session_id   TEXT COLLATE "C" NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        seq          BIGINT  NOT NULL CHECK (seq >= 1),
        id           TEXT COLLATE "C" NOT NULL,
        parent_id    TEXT    NOT NULL DEFAULT '',
        kind         TEXT    NOT NULL CHECK (kind IN ('message', 'compaction', 'custom')),
        role         INTEGER,
        token_count  BIGINT  NOT NULL DEFAULT 0 CHECK (token_count >= 0),
        timestamp_ms BIGINT  NOT NULL,
        hidden       BOOLEAN NOT NULL DEFAULT false,
        -- TranscriptEntry.encode(entry).finish(): the entry exactly as it is returned
        payload      BYTEA   NOT NULL,
        PRIMARY KEY (session_id, seq),
        CONSTRAINT entries_by_id UNIQUE (session_id, id)
      );

      CREATE TABLE entry_revisions (
        session_id     TEXT COLLATE "C" NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        entry_id       TEXT COLLATE "C" NOT NULL,
        revision       BIGINT NOT NULL CHECK (revision >= 0),
        token_count    BIGINT NOT NULL DEFAULT 0 CHECK (token_count >= 0),
        replaced_at_ms BIGINT NOT NULL,
        reason         TEXT   NOT NULL DEFAULT '',
        payload        BYTEA  NOT NULL,
        PRIMARY KEY (session_id, entry_id, revision)
      );

      -- The primary key is what makes an idempotency key race-free across replicas: of two
      -- transactions recording one key, the second fails and is run again, then answers replayed.
      CREATE TABLE idempotency_keys (
        session_id      TEXT COLLATE "C" NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        idempotency_key TEXT COLLATE "C" NOT NULL,
        request_hash    TEXT   NOT NULL,
        entry_ids       TEXT   NOT NULL,
        token_counts    TEXT   NOT NULL,
        created_at_ms   BIGINT NOT NULL,
        CONSTRAINT idempotency_keys_pkey PRIMARY KEY (session_id, idempotency_key)
      );

      CREATE TABLE engine_registrations (
        engine_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        owner            TEXT    NOT NULL,
        endpoint         TEXT    NOT NULL DEFAULT '',
        info             BYTEA   NOT NULL,
        protocol_version INTEGER NOT NULL DEFAULT 0,
        registered_at_ms BIGINT  NOT NULL
      );

      CREATE TABLE engine_quarantines (
        engine_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        payload       BYTEA  NOT NULL,
        updated_at_ms BIGINT NOT NULL
      );
    `,
  },
  {
    version: 2,
    description: "subagent TTLs: when a child session expires, and when (and why) it ended",
    sql: `
      -- As SQLite's migration 4: ttl_ms as an absolute time (0: none), the end (0: not ended) and
      -- its SubagentEndReason. The sweep claims with FOR UPDATE SKIP LOCKED (transcript-writes.ts).
      ALTER TABLE sessions ADD COLUMN expires_at_ms BIGINT  NOT NULL DEFAULT 0;
      ALTER TABLE sessions ADD COLUMN ended_at_ms   BIGINT  NOT NULL DEFAULT 0;
      ALTER TABLE sessions ADD COLUMN end_reason    INTEGER NOT NULL DEFAULT 0;

      CREATE INDEX sessions_expiring ON sessions (expires_at_ms) WHERE expires_at_ms > 0 AND ended_at_ms = 0;
    `,
  },
  {
    version: 3,
    description: "pinned system messages: a partial index on a session's system message entries by seq",
    sql: `
      -- As SQLite's migration 5 (docs/pinned-messages.md): the active view holds every non-hidden
      -- system message entry (role 4 = ROLE_SYSTEM) from before its cut; this index holds only those.
      CREATE INDEX entries_pinned ON entries (session_id, seq) WHERE kind = 'message' AND role = 4 AND NOT hidden;
    `,
  },
  {
    version: 4,
    description: "view revisions: a session's cached active view is still right while its view_revision holds",
    sql: `
      -- Each replica caches the decoded active views it assembles (src/store/view-cache.ts) and
      -- checks one against the session row on every read. Appends and compactions move last_seq and
      -- the compaction pointers; every other change to a session's stored entries moves
      -- view_revision, and the database does it itself — any UPDATE or DELETE of entries, through
      -- whatever code path — so no writer can forget. New rows draw from one sequence, so a session
      -- deleted and created again (on any replica) never repeats a revision. Rows that exist already
      -- keep 0: each is one session's, and nothing else has that id.
      CREATE SEQUENCE contextd_view_revisions;
      ALTER TABLE sessions ADD COLUMN view_revision BIGINT NOT NULL DEFAULT 0;
      ALTER TABLE sessions ALTER COLUMN view_revision SET DEFAULT nextval('contextd_view_revisions');

      CREATE FUNCTION contextd_entries_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE sessions SET view_revision = nextval('contextd_view_revisions')
          WHERE session_id IN (SELECT DISTINCT session_id FROM changed_entries);
        RETURN NULL;
      END
      $$;
      -- A transition table serves one event per trigger: one trigger each.
      CREATE TRIGGER entries_updated AFTER UPDATE ON entries
        REFERENCING OLD TABLE AS changed_entries FOR EACH STATEMENT EXECUTE FUNCTION contextd_entries_changed();
      CREATE TRIGGER entries_deleted AFTER DELETE ON entries
        REFERENCING OLD TABLE AS changed_entries FOR EACH STATEMENT EXECUTE FUNCTION contextd_entries_changed();
    `,
  },
  {
    version: 5,
    description: "message keys: a runtime's identity of each message, unique in its session; where the session's messages end",
    sql: `
      -- As SQLite's migration 6: AppendMessagesRequest.message_keys, unique per session (NULL for
      -- none), and the newest keyed message's key and newest message's timestamp on the session row.
      ALTER TABLE entries ADD COLUMN message_key TEXT COLLATE "C";
      CREATE UNIQUE INDEX entries_by_message_key ON entries (session_id, message_key) WHERE message_key IS NOT NULL;
      ALTER TABLE sessions ADD COLUMN last_message_key TEXT COLLATE "C" NOT NULL DEFAULT '';
      ALTER TABLE sessions ADD COLUMN last_message_timestamp_ms BIGINT NOT NULL DEFAULT 0;
      UPDATE sessions s SET last_message_timestamp_ms = coalesce((
        SELECT e.timestamp_ms FROM entries e
        WHERE e.session_id = s.session_id AND e.kind = 'message' ORDER BY e.seq DESC LIMIT 1), 0);
    `,
  },
  {
    version: 6,
    description: "engine instances: many sidecars per engine id, each with its own quarantine record",
    sql: `
      -- As SQLite's migration 7 (docs/registry.md, "Instances"): one row per live instance, the
      -- engine row staying the id's owner and its most recent instance; no foreign key (a replica
      -- older than instances deletes the engine row alone; its instance rows are then ignored).
      CREATE TABLE engine_instances (
        engine_id        TEXT COLLATE "C" NOT NULL,
        instance_id      TEXT COLLATE "C" NOT NULL,
        endpoint         TEXT    NOT NULL DEFAULT '',
        locality         BYTEA   NOT NULL DEFAULT '',
        info             BYTEA   NOT NULL,
        protocol_version INTEGER NOT NULL DEFAULT 0,
        registered_at_ms BIGINT  NOT NULL,
        CONSTRAINT engine_instances_pkey PRIMARY KEY (engine_id, instance_id)
      );
      INSERT INTO engine_instances (engine_id, instance_id, endpoint, info, protocol_version, registered_at_ms)
        SELECT engine_id, endpoint, endpoint, info, protocol_version, registered_at_ms FROM engine_registrations WHERE endpoint <> '';

      CREATE TABLE engine_instance_quarantines (
        engine_id     TEXT COLLATE "C" NOT NULL,
        instance_id   TEXT COLLATE "C" NOT NULL,
        payload       BYTEA  NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        CONSTRAINT engine_instance_quarantines_pkey PRIMARY KEY (engine_id, instance_id)
      );
    `,
  },
  {
    version: 7,
    description: "history search: each entry's words as a tsvector, under a GIN index",
    sql: `
      -- History search (proto/contextd/v1/search.proto, src/store/postgres/search.ts): the words of
      -- each message's text and each compaction's summary, cut by src/store/search-text.ts (the same
      -- words as the SQLite index) and sent lower-cased, joined by spaces, to to_tsvector with the
      -- simple configuration: its parser sees only words and spaces and keeps each word as it is,
      -- with its position (phrases match in order). No dictionary or stemming decides what a word is.
      -- Empty for entries without text; NULL only until the backfill has read the entry. Written by
      -- every write of an entry; DeleteSession removes it with the entry. No extension needed.
      ALTER TABLE entries ADD COLUMN search tsvector;
    `,
    backfill: backfillSearch,
  }, // Versions 8 and 9 are SQLite's own (its search index file); the numbers stay aligned from 10 on.
  {
    version: 10,
    description: "deletion that reaches every engine: the engines that served each session, durable forget deliveries, leases",
    sql: `
      -- Every engine called for a session (src/store/deletions.ts): a deletion sends ForgetSession
      -- to each. Removed with the session.
      CREATE TABLE session_engines (
        session_id  TEXT COLLATE "C" NOT NULL,
        engine_id   TEXT COLLATE "C" NOT NULL,
        first_at_ms BIGINT NOT NULL,
        CONSTRAINT session_engines_pkey PRIMARY KEY (session_id, engine_id)
      );
      -- One ForgetSession to deliver: written in the deletion's transaction, removed when the engine
      -- acknowledges. The lease says which replica is delivering it (src/host/forget-delivery.ts);
      -- replicas claim with FOR UPDATE SKIP LOCKED, so none claims a row another is claiming.
      CREATE TABLE forget_deliveries (
        session_id         TEXT COLLATE "C" NOT NULL,
        engine_id          TEXT COLLATE "C" NOT NULL,
        session_key        TEXT    NOT NULL,
        agent_id           TEXT    NOT NULL,
        reason             INTEGER NOT NULL,
        deleted_at_ms      BIGINT  NOT NULL,
        attempts           INTEGER NOT NULL DEFAULT 0,
        next_attempt_at_ms BIGINT  NOT NULL,
        lease_owner        TEXT    NOT NULL DEFAULT '',
        lease_until_ms     BIGINT  NOT NULL DEFAULT 0,
        last_error         TEXT    NOT NULL DEFAULT '',
        CONSTRAINT forget_deliveries_pkey PRIMARY KEY (session_id, engine_id)
      );
      CREATE INDEX forget_deliveries_due ON forget_deliveries (next_attempt_at_ms);
      CREATE INDEX forget_deliveries_by_engine ON forget_deliveries (engine_id);
      -- Named leases: one replica at a time runs the loop that holds one (the retention sweep).
      CREATE TABLE leases (
        name     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        owner    TEXT   NOT NULL,
        until_ms BIGINT NOT NULL
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
      CREATE TABLE audit_events (
        id         BIGSERIAL PRIMARY KEY,
        at_ms      BIGINT NOT NULL,
        actor      TEXT   NOT NULL,
        action     TEXT   NOT NULL,
        target     TEXT   NOT NULL,
        peer       TEXT   NOT NULL,
        outcome    TEXT   NOT NULL,
        method     TEXT   NOT NULL,
        request_id TEXT   NOT NULL
      );
      CREATE INDEX audit_events_by_time ON audit_events (at_ms);
      CREATE TABLE config_reservations (
        engine_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        owner     TEXT NOT NULL
      );
    `,
  },
  {
    version: 12,
    description: "bytes each session holds, kept by triggers, for the per-agent quotas",
    sql: `
      ALTER TABLE sessions ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;
      UPDATE sessions s SET stored_bytes =
        (SELECT coalesce(sum(octet_length(payload)), 0) FROM entries e WHERE e.session_id = s.session_id) +
        (SELECT coalesce(sum(octet_length(payload)), 0) FROM entry_revisions r WHERE r.session_id = s.session_id);
      CREATE FUNCTION contextd_stored_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          UPDATE sessions SET stored_bytes = stored_bytes + octet_length(NEW.payload) WHERE session_id = NEW.session_id;
        ELSIF NEW.payload IS DISTINCT FROM OLD.payload THEN
          UPDATE sessions SET stored_bytes = stored_bytes + octet_length(NEW.payload) - octet_length(OLD.payload) WHERE session_id = NEW.session_id;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER entries_stored_bytes AFTER INSERT OR UPDATE OF payload ON entries
        FOR EACH ROW EXECUTE FUNCTION contextd_stored_bytes();
      CREATE TRIGGER revisions_stored_bytes AFTER INSERT ON entry_revisions
        FOR EACH ROW EXECUTE FUNCTION contextd_stored_bytes();
      CREATE INDEX sessions_by_agent ON sessions (agent_id);
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** The advisory lock every migrating replica takes: "contextd" as a big-endian int8. */
export const MIGRATION_LOCK_KEY = "7165066978367403108";

export interface MigrationOutcome {
  /** The version the database was at. */
  found: number;
  /** Versions this call applied (empty when another replica had already migrated). */
  applied: number[];
}

/**
 * Brings the database to `target` (SCHEMA_VERSION unless a test asks for an older schema). Throws
 * FailedPreconditionError for a database whose schema is newer than this build.
 */
export async function migrate(db: PgDatabase, target: number = SCHEMA_VERSION): Promise<MigrationOutcome> {
  if (!MIGRATIONS.some((m) => m.version === target)) {
    throw new Error(`unknown transcript store schema version ${target}`);
  }
  return db.transaction(async (conn) => {
    await conn.query("SELECT pg_advisory_xact_lock($1::bigint)", [MIGRATION_LOCK_KEY]);
    await conn.query(
      `CREATE TABLE IF NOT EXISTS contextd_schema_migrations (
         version     INTEGER     NOT NULL PRIMARY KEY,
         description TEXT        NOT NULL,
         applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
       )`,
    );
    const rows = (await conn.query<{ v: number }>("SELECT COALESCE(MAX(version), 0)::int AS v FROM contextd_schema_migrations")).rows;
    const found = rows[0].v;
    if (found > SCHEMA_VERSION) {
      throw new FailedPreconditionError(
        `PostgreSQL store at ${db.where} has schema version ${found}, newer than this contextd supports (${SCHEMA_VERSION}); ` +
          "upgrade contextd or point it at another database",
      );
    }
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (m.version <= found || m.version > target) continue;
      await conn.query(m.sql);
      await m.backfill?.(conn);
      await conn.query("INSERT INTO contextd_schema_migrations (version, description) VALUES ($1, $2)", [m.version, m.description]);
      applied.push(m.version);
    }
    return { found, applied };
  });
}

/** Migration 7's backfill: every entry's tsvector, a thousand entries a statement; then the index. */
async function backfillSearch(conn: Conn): Promise<void> {
  for (;;) {
    const { rows } = await conn.query<{ session_id: string; seq: number; payload: Buffer }>(
      "SELECT session_id, seq, payload FROM entries WHERE search IS NULL LIMIT 1000",
    );
    if (rows.length === 0) break;
    await conn.query(
      `UPDATE entries e SET search = to_tsvector('pg_catalog.simple', v.words) FROM unnest($1::text[], $2::bigint[], $3::text[]) AS v(session_id, seq, words)
       WHERE e.session_id = v.session_id AND e.seq = v.seq`,
      [rows.map((r) => r.session_id), rows.map((r) => r.seq), rows.map((r) => entryIndexText(decodeEntry(r.payload)))],
    );
  }
  await conn.query("CREATE INDEX entries_search ON entries USING gin (search)");
}
