import type Database from "better-sqlite3";

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
import { SESSION_COLUMNS } from "../session-columns.js";
import { LOG_INDEX } from "./search-index.js";

// SqliteStore's StoreCopy half (contextctl migrate-store): rows read and written as they are,
// column for column, so a copy keeps ids, seqs, payloads and the derived active-view pointers.
// The statements are prepared on first use: a store that is never copied never prepares them.

export class SqliteStoreCopy {
  constructor(private readonly db: Database.Database) {}

  countRows(): StoreRowCounts {
    return this.db
      .prepare(
        `SELECT (SELECT COUNT(*) FROM sessions) AS sessions, (SELECT COUNT(*) FROM entries) AS entries,
                (SELECT COUNT(*) FROM entry_revisions) AS entryRevisions, (SELECT COUNT(*) FROM idempotency_keys) AS idempotencyKeys,
                (SELECT COUNT(*) FROM engine_registrations) AS registrations, (SELECT COUNT(*) FROM engine_instances) AS instances,
                (SELECT COUNT(*) FROM engine_quarantines) AS quarantines,
                (SELECT COUNT(*) FROM engine_instance_quarantines) AS instanceQuarantines`,
      )
      .get() as StoreRowCounts;
  }

  listSessionIds(afterId: string, limit: number): string[] {
    return this.db.prepare("SELECT session_id FROM sessions WHERE session_id > ? ORDER BY session_id LIMIT ?").pluck().all(afterId, limit) as string[];
  }

  readRawSession(sessionId: string): RawSession | undefined {
    return this.db.prepare(`SELECT ${SESSION_COLUMNS.map(([k, c]) => `${c} AS ${k}`).join(", ")} FROM sessions WHERE session_id = ?`).get(sessionId) as
      RawSession | undefined;
  }

  readRawEntries(sessionId: string, afterSeq: number, limit: number): RawEntry[] {
    const rows = this.db
      .prepare(
        `SELECT seq, id, parent_id AS parentId, kind, role, token_count AS tokenCount, timestamp_ms AS timestampMs, hidden,
                message_key AS messageKey, payload
         FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      )
      .all(sessionId, afterSeq, limit) as (Omit<RawEntry, "hidden"> & { hidden: number })[];
    return rows.map((r) => ({ ...r, hidden: r.hidden === 1 }));
  }

  readRawRevisions(sessionId: string, after: { entryId: string; revision: number } | null, limit: number): RawRevision[] {
    return this.db
      .prepare(
        `SELECT entry_id AS entryId, revision, token_count AS tokenCount, replaced_at_ms AS replacedAtMs, reason, payload
         FROM entry_revisions WHERE session_id = ? AND (entry_id > ? OR (entry_id = ? AND revision > ?))
         ORDER BY entry_id, revision LIMIT ?`,
      )
      .all(sessionId, after?.entryId ?? "", after?.entryId ?? "", after?.revision ?? -1, limit) as RawRevision[];
  }

  readRawIdempotencyKeys(sessionId: string, afterKey: string, limit: number): RawIdempotencyKey[] {
    return this.db
      .prepare(
        `SELECT idempotency_key AS key, request_hash AS requestHash, entry_ids AS entryIdsJson, token_counts AS tokenCountsJson,
                created_at_ms AS createdAtMs
         FROM idempotency_keys WHERE session_id = ? AND idempotency_key > ? ORDER BY idempotency_key LIMIT ?`,
      )
      .all(sessionId, afterKey, limit) as RawIdempotencyKey[];
  }

  readRawRegistry(): RawRegistry {
    return {
      registrations: this.db
        .prepare(
          `SELECT engine_id AS engineId, owner, endpoint, info, protocol_version AS protocolVersion, registered_at_ms AS registeredAtMs
           FROM engine_registrations ORDER BY engine_id`,
        )
        .all() as RawRegistration[],
      instances: this.db
        .prepare(
          `SELECT engine_id AS engineId, instance_id AS instanceId, endpoint, locality, info, protocol_version AS protocolVersion,
                  registered_at_ms AS registeredAtMs
           FROM engine_instances ORDER BY engine_id, instance_id`,
        )
        .all() as RawInstance[],
      quarantines: this.db
        .prepare("SELECT engine_id AS engineId, payload, updated_at_ms AS updatedAtMs FROM engine_quarantines ORDER BY engine_id")
        .all() as RawQuarantine[],
      instanceQuarantines: this.db
        .prepare(
          `SELECT engine_id AS engineId, instance_id AS instanceId, payload, updated_at_ms AS updatedAtMs
           FROM engine_instance_quarantines ORDER BY engine_id, instance_id`,
        )
        .all() as RawInstanceQuarantine[],
    };
  }

  /**
   * BEGIN IMMEDIATE on the store's own connection, held across the awaits of the writer's calls
   * (better-sqlite3's transaction() cannot span them): the file is locked for other writers until
   * commit or rollback, and every other call on this store would join the transaction, which is why
   * nothing else may use the store meanwhile.
   */
  beginRawWrite(where: string): RawWriter {
    this.db.exec("BEGIN IMMEDIATE");
    try {
      const held = Object.entries(this.countRows()).filter(([, n]) => n > 0);
      if (held.length > 0) {
        throw new FailedPreconditionError(`SQLite store ${where} is not empty (${held.map(([t, n]) => `${n} ${t}`).join(", ")}); copy into an empty store`);
      }
    } catch (err) {
      this.db.exec("ROLLBACK");
      throw err;
    }
    return new SqliteRawWriter(this.db);
  }
}

class SqliteRawWriter implements RawWriter {
  private done = false;
  private readonly insertSession: Database.Statement;
  private readonly insertEntry: Database.Statement;
  private readonly insertRevision: Database.Statement;
  private readonly insertKey: Database.Statement;
  private readonly numberSession: Database.Statement;
  private readonly searchSession: Database.Statement;
  private readonly indexEntry: Database.Statement;

  constructor(private readonly db: Database.Database) {
    const cols = SESSION_COLUMNS.map(([, c]) => c);
    this.insertSession = db.prepare(`INSERT INTO sessions (${cols.join(", ")}) VALUES (${SESSION_COLUMNS.map(([k]) => `@${k}`).join(", ")})`);
    this.insertEntry = db.prepare(
      `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, hidden, message_key, payload)
       VALUES (@sessionId, @seq, @id, @parentId, @kind, @role, @tokenCount, @timestampMs, @hidden, @messageKey, @payload)`,
    );
    this.insertRevision = db.prepare(
      `INSERT INTO entry_revisions (session_id, entry_id, revision, token_count, replaced_at_ms, reason, payload)
       VALUES (@sessionId, @entryId, @revision, @tokenCount, @replacedAtMs, @reason, @payload)`,
    );
    // The search index is this store's own: sessions are numbered and entries logged for the indexer as they arrive.
    this.numberSession = db.prepare("UPDATE sessions SET search_id = (SELECT coalesce(max(search_id), 0) + 1 FROM sessions) WHERE session_id = ?");
    this.searchSession = db.prepare("SELECT search_id AS searchId FROM sessions WHERE session_id = ?");
    this.indexEntry = db.prepare(`INSERT INTO search_log (kind, search_id, seq) VALUES (${LOG_INDEX}, ?, ?)`);
    this.insertKey = db.prepare(
      `INSERT INTO idempotency_keys (session_id, idempotency_key, request_hash, entry_ids, token_counts, created_at_ms)
       VALUES (@sessionId, @key, @requestHash, @entryIdsJson, @tokenCountsJson, @createdAtMs)`,
    );
  }

  async writeSession(s: RawSession): Promise<void> {
    this.write(() => {
      this.insertSession.run(s);
      this.numberSession.run(s.sessionId);
    });
  }

  async writeEntries(sessionId: string, entries: RawEntry[]): Promise<void> {
    this.write(() => {
      const session = this.searchSession.get(sessionId) as { searchId: number } | undefined;
      for (const e of entries) {
        this.insertEntry.run({ ...e, sessionId, hidden: e.hidden ? 1 : 0 });
        if (session) this.indexEntry.run(session.searchId, e.seq);
      }
    });
  }

  async writeRevisions(sessionId: string, revisions: RawRevision[]): Promise<void> {
    this.write(() => {
      for (const r of revisions) this.insertRevision.run({ ...r, sessionId });
    });
  }

  async writeIdempotencyKeys(sessionId: string, keys: RawIdempotencyKey[]): Promise<void> {
    this.write(() => {
      for (const k of keys) this.insertKey.run({ ...k, sessionId });
    });
  }

  async writeRegistry(registry: RawRegistry): Promise<void> {
    this.write(() => {
      const reg = this.db.prepare(
        `INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms)
         VALUES (@engineId, @owner, @endpoint, @info, @protocolVersion, @registeredAtMs)`,
      );
      const instance = this.db.prepare(
        `INSERT INTO engine_instances (engine_id, instance_id, endpoint, locality, info, protocol_version, registered_at_ms)
         VALUES (@engineId, @instanceId, @endpoint, @locality, @info, @protocolVersion, @registeredAtMs)`,
      );
      const q = this.db.prepare("INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms) VALUES (@engineId, @payload, @updatedAtMs)");
      const iq = this.db.prepare(
        `INSERT INTO engine_instance_quarantines (engine_id, instance_id, payload, updated_at_ms)
         VALUES (@engineId, @instanceId, @payload, @updatedAtMs)`,
      );
      for (const r of registry.registrations) reg.run(r);
      for (const i of registry.instances) instance.run(i);
      for (const x of registry.quarantines) q.run(x);
      for (const x of registry.instanceQuarantines) iq.run(x);
    });
  }

  async commit(): Promise<void> {
    this.write(() => this.db.exec("COMMIT"));
    this.done = true;
  }

  async rollback(): Promise<void> {
    if (this.done) return;
    this.done = true;
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
  }

  /** Runs `fn`; a failure rolls the whole transaction back (nothing of it can commit any more). */
  private write(fn: () => void): void {
    if (this.done) throw new Error("this raw write has already been committed or rolled back");
    try {
      fn();
    } catch (err) {
      this.done = true;
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      throw err;
    }
  }
}
