import type pg from "pg";

import { FailedPreconditionError } from "../../contract/errors.js";
import type {
  RawEntry,
  RawIdempotencyKey,
  RawInstance,
  RawInstanceQuarantine,
  RawQuarantine,
  RawRegistration,
  RawRegistry,
  RawRevision,
  RawSession,
  RawWriter,
  StoreRowCounts,
} from "../types.js";
import type { Conn, PgDatabase } from "./database.js";
import { MIGRATION_LOCK_KEY } from "./migrations.js";
import { SEARCH_VECTOR } from "./statements.js";
import { bytea, chunks, decodeEntry } from "./rows.js";
import { entryIndexText } from "../search-text.js";
import { SESSION_COLUMNS } from "../session-columns.js";

// PostgresStore's StoreCopy half (contextctl migrate-store): rows read and written as they are,
// column for column, so a copy keeps ids, seqs, payloads and the derived active-view pointers.

const SELECT_SESSION = `SELECT ${SESSION_COLUMNS.map(([k, c]) => `${c} AS "${k}"`).join(", ")} FROM sessions WHERE session_id = $1`;

export async function countRows(db: PgDatabase): Promise<StoreRowCounts> {
  return db.read(async (conn) => countIn(conn));
}

async function countIn(conn: Conn): Promise<StoreRowCounts> {
  const { rows } = await conn.query<StoreRowCounts>(
    `SELECT (SELECT COUNT(*) FROM sessions) AS sessions, (SELECT COUNT(*) FROM entries) AS entries,
            (SELECT COUNT(*) FROM entry_revisions) AS "entryRevisions", (SELECT COUNT(*) FROM idempotency_keys) AS "idempotencyKeys",
            (SELECT COUNT(*) FROM engine_registrations) AS registrations, (SELECT COUNT(*) FROM engine_instances) AS instances,
            (SELECT COUNT(*) FROM engine_quarantines) AS quarantines,
            (SELECT COUNT(*) FROM engine_instance_quarantines) AS "instanceQuarantines"`,
  );
  return rows[0];
}

export async function listSessionIds(db: PgDatabase, afterId: string, limit: number): Promise<string[]> {
  const { rows } = await db.read((conn) =>
    conn.query<{ session_id: string }>("SELECT session_id FROM sessions WHERE session_id > $1 ORDER BY session_id LIMIT $2", [afterId, limit]),
  );
  return rows.map((r) => r.session_id);
}

export async function readRawSession(db: PgDatabase, sessionId: string): Promise<RawSession | undefined> {
  return (await db.read((conn) => conn.query<RawSession>(SELECT_SESSION, [sessionId]))).rows[0];
}

export async function readRawEntries(db: PgDatabase, sessionId: string, afterSeq: number, limit: number): Promise<RawEntry[]> {
  const { rows } = await db.read((conn) =>
    conn.query<RawEntry>(
      `SELECT seq, id, parent_id AS "parentId", kind, role, token_count AS "tokenCount", timestamp_ms AS "timestampMs", hidden,
              message_key AS "messageKey", payload
       FROM entries WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [sessionId, afterSeq, limit],
    ),
  );
  return rows;
}

export async function readRawRevisions(
  db: PgDatabase,
  sessionId: string,
  after: { entryId: string; revision: number } | null,
  limit: number,
): Promise<RawRevision[]> {
  const { rows } = await db.read((conn) =>
    conn.query<RawRevision>(
      `SELECT entry_id AS "entryId", revision, token_count AS "tokenCount", replaced_at_ms AS "replacedAtMs", reason, payload
       FROM entry_revisions WHERE session_id = $1 AND (entry_id, revision) > ($2, $3) ORDER BY entry_id, revision LIMIT $4`,
      [sessionId, after?.entryId ?? "", after?.revision ?? -1, limit],
    ),
  );
  return rows;
}

export async function readRawIdempotencyKeys(db: PgDatabase, sessionId: string, afterKey: string, limit: number): Promise<RawIdempotencyKey[]> {
  const { rows } = await db.read((conn) =>
    conn.query<RawIdempotencyKey>(
      `SELECT idempotency_key AS key, request_hash AS "requestHash", entry_ids AS "entryIdsJson", token_counts AS "tokenCountsJson",
              created_at_ms AS "createdAtMs"
       FROM idempotency_keys WHERE session_id = $1 AND idempotency_key > $2 ORDER BY idempotency_key LIMIT $3`,
      [sessionId, afterKey, limit],
    ),
  );
  return rows;
}

export async function readRawRegistry(db: PgDatabase): Promise<RawRegistry> {
  return db.read(async (conn) => ({
    registrations: (
      await conn.query<RawRegistration>(
        `SELECT engine_id AS "engineId", owner, endpoint, info, protocol_version AS "protocolVersion", registered_at_ms AS "registeredAtMs"
         FROM engine_registrations ORDER BY engine_id`,
      )
    ).rows,
    instances: (
      await conn.query<RawInstance>(
        `SELECT engine_id AS "engineId", instance_id AS "instanceId", endpoint, locality, info, protocol_version AS "protocolVersion",
                registered_at_ms AS "registeredAtMs"
         FROM engine_instances ORDER BY engine_id, instance_id`,
      )
    ).rows,
    quarantines: (
      await conn.query<RawQuarantine>(`SELECT engine_id AS "engineId", payload, updated_at_ms AS "updatedAtMs" FROM engine_quarantines ORDER BY engine_id`)
    ).rows,
    instanceQuarantines: (
      await conn.query<RawInstanceQuarantine>(
        `SELECT engine_id AS "engineId", instance_id AS "instanceId", payload, updated_at_ms AS "updatedAtMs"
         FROM engine_instance_quarantines ORDER BY engine_id, instance_id`,
      )
    ).rows,
  }));
}

/**
 * One transaction on a dedicated connection. Taking the migration lock keeps two copies into one
 * database from both finding it empty; the emptiness check runs after it, inside the transaction.
 */
export async function beginRawWrite(db: PgDatabase): Promise<RawWriter> {
  const conn = await db.dedicated();
  try {
    await conn.query("BEGIN");
    await conn.query("SELECT pg_advisory_xact_lock($1::bigint)", [MIGRATION_LOCK_KEY]);
    const counts = await countIn(conn);
    const held = Object.entries(counts).filter(([, n]) => Number(n) > 0);
    if (held.length > 0) {
      throw new FailedPreconditionError(
        `PostgreSQL store at ${db.where} is not empty (${held.map(([t, n]) => `${n} ${t}`).join(", ")}); copy into an empty database`,
      );
    }
  } catch (err) {
    await conn.query("ROLLBACK").catch(() => {});
    conn.release(true);
    throw db.translate(err);
  }
  return new PgRawWriter(db, conn);
}

class PgRawWriter implements RawWriter {
  private done = false;

  constructor(
    private readonly db: PgDatabase,
    private readonly conn: pg.PoolClient,
  ) {}

  async writeSession(s: RawSession): Promise<void> {
    const cols = SESSION_COLUMNS.map(([, c]) => c);
    await this.query(
      `INSERT INTO sessions (${cols.join(", ")}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(", ")})`,
      SESSION_COLUMNS.map(([k]) => s[k]),
    );
  }

  async writeEntries(sessionId: string, entries: RawEntry[]): Promise<void> {
    for (const part of chunks(entries)) {
      await this.query(
        `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload, search)
         SELECT $1, u.seq, u.id, u.parent_id, u.kind, u.role, u.token_count, u.timestamp_ms, u.hidden, u.message_key, u.payload, ${SEARCH_VECTOR("u.words")}
         FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[], $8::bigint[], $9::boolean[], $10::text[], $11::bytea[], $12::text[])
           AS u(seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload, words)`,
        [
          sessionId,
          part.map((e) => e.seq),
          part.map((e) => e.id),
          part.map((e) => e.parentId),
          part.map((e) => e.kind),
          part.map((e) => e.role),
          part.map((e) => e.tokenCount),
          part.map((e) => e.timestampMs),
          part.map((e) => e.hidden),
          part.map((e) => e.messageKey),
          part.map((e) => bytea(e.payload)),
          // The search index is this store's own (migration 7): made from the payload, as an append makes it.
          part.map((e) => entryIndexText(decodeEntry(e.payload))),
        ],
      );
    }
  }

  async writeRevisions(sessionId: string, revisions: RawRevision[]): Promise<void> {
    for (const part of chunks(revisions)) {
      await this.query(
        `INSERT INTO entry_revisions (session_id, entry_id, revision, token_count, replaced_at_ms, reason, payload)
         SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::bytea[])`,
        [
          sessionId,
          part.map((r) => r.entryId),
          part.map((r) => r.revision),
          part.map((r) => r.tokenCount),
          part.map((r) => r.replacedAtMs),
          part.map((r) => r.reason),
          part.map((r) => bytea(r.payload)),
        ],
      );
    }
  }

  async writeIdempotencyKeys(sessionId: string, keys: RawIdempotencyKey[]): Promise<void> {
    for (const part of chunks(keys)) {
      await this.query(
        `INSERT INTO idempotency_keys (session_id, idempotency_key, request_hash, entry_ids, token_counts, created_at_ms)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])`,
        [
          sessionId,
          part.map((k) => k.key),
          part.map((k) => k.requestHash),
          part.map((k) => k.entryIdsJson),
          part.map((k) => k.tokenCountsJson),
          part.map((k) => k.createdAtMs),
        ],
      );
    }
  }

  async writeRegistry(registry: RawRegistry): Promise<void> {
    for (const r of registry.registrations) {
      await this.query(
        "INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        [r.engineId, r.owner, r.endpoint, bytea(r.info), r.protocolVersion, r.registeredAtMs],
      );
    }
    for (const i of registry.instances) {
      await this.query(
        `INSERT INTO engine_instances (engine_id, instance_id, endpoint, locality, info, protocol_version, registered_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [i.engineId, i.instanceId, i.endpoint, bytea(i.locality), bytea(i.info), i.protocolVersion, i.registeredAtMs],
      );
    }
    for (const q of registry.quarantines) {
      await this.query("INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms) VALUES ($1, $2, $3)", [q.engineId, bytea(q.payload), q.updatedAtMs]);
    }
    for (const q of registry.instanceQuarantines) {
      await this.query("INSERT INTO engine_instance_quarantines (engine_id, instance_id, payload, updated_at_ms) VALUES ($1, $2, $3, $4)", [
        q.engineId,
        q.instanceId,
        bytea(q.payload),
        q.updatedAtMs,
      ]);
    }
  }

  async commit(): Promise<void> {
    await this.query("COMMIT");
    this.finish();
  }

  async rollback(): Promise<void> {
    if (this.done) return;
    await this.conn.query("ROLLBACK").catch(() => {});
    this.finish(true);
  }

  private async query(text: string, values: unknown[] = []): Promise<void> {
    if (this.done) throw new Error("this raw write has already been committed or rolled back");
    try {
      await this.conn.query(text, values);
    } catch (err) {
      // A failed statement aborts the transaction: nothing of it will ever commit.
      await this.conn.query("ROLLBACK").catch(() => {});
      this.finish(true);
      throw this.db.translate(err);
    }
  }

  private finish(discard = false): void {
    if (this.done) return;
    this.done = true;
    this.conn.release(discard);
  }
}
