import Database from "better-sqlite3";

import {
  AlreadyExistsError,
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
} from "../../contract/errors.js";
import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import type { CompactionEntry, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { RegistryStore, StoredRegistration } from "../registry-store.js";
import type {
  ActiveView,
  EntryRevision,
  EntryRewriteInput,
  NewMessage,
  RewriteOutcome,
  SeedEntry,
  SessionLabels,
  SessionRecord,
  TranscriptStore,
} from "../types.js";
import { migrate } from "./migrations.js";
import {
  checkTokenCount,
  compactionEntryRow,
  decodeEntry,
  messageEntryRow,
  newEntryId,
  newSessionRow,
  prepareStatements,
  quarantineRow,
  registrationRow,
  rewrittenEntryRow,
  toEntryRevision,
  toSessionRecord,
  toStoredRegistration,
  toViewMessage,
  type SessionRow,
  type Statements,
} from "./rows.js";

export { newEntryId } from "./rows.js";

const BUSY_TIMEOUT_MS = 5_000;
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1_000;
const DEFAULT_READ_LIMIT = 1_000;

/**
 * The embedded transcript store: one SQLite file (WAL, synchronous=FULL, so an acknowledged write
 * survives kill -9 and power loss). better-sqlite3 is synchronous; the async methods only adapt it
 * to the TranscriptStore interface. Every write runs in one IMMEDIATE transaction.
 *
 * The session row carries the derived pointers of the active view (latest compaction seq, the seq
 * the view starts from, summary tokens, last entry id), so appends and readActiveView never touch
 * history outside the active view: their cost does not grow with the length of the transcript.
 *
 * Behaviour where the interface is silent:
 * - appendMessages with an empty list still creates the session (with `labels`) and returns [];
 *   labels of an existing session are left unchanged.
 * - readEntries and setSystemAdditionTokens throw NotFoundError for an unknown session; readEntries
 *   treats a non-positive limit as 1000.
 * - listSessions treats a non-positive limit as 100 and caps it at 1000; `nextCursor` is "" on the
 *   last page; a malformed cursor is an InvalidArgumentError.
 * - updated_at_ms moves on appends, compactions and rewrites only (not on setSystemAdditionTokens).
 * - rewriteEntries: the new message keeps the entry's id (as `message.id`) and the entry's
 *   timestamp (as `message.timestampMs`, whatever the caller sent); `tokenCount` is the new count.
 *   Entries anywhere in the session's history may be rewritten, not only those of the active view.
 *   An id named twice in one call is an InvalidArgumentError; an empty list writes nothing and
 *   returns zeros (the session must still exist). `bytesFreed` is the sum over the call, floored at 0.
 * - readEntryRevisions: NotFoundError for an unknown session or an id that is no entry of it; []
 *   for an entry never rewritten.
 *
 * It is also the RegistryStore (engine registrations and quarantine records live in the same file).
 * Lists are ordered by engine id.
 */
export class SqliteStore implements TranscriptStore, RegistryStore {
  readonly kind = "sqlite" as const;

  private readonly stmts: Statements;

  private constructor(private readonly db: Database.Database) {
    this.stmts = prepareStatements(db);
  }

  /** Opens (creating when missing) the database file at `path` and migrates it. */
  static open(path: string): SqliteStore {
    const db = new Database(path);
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.pragma("foreign_keys = ON");
      migrate(db);
      return new SqliteStore(db);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /** The file this store writes to. */
  get path(): string {
    return this.db.name;
  }

  async appendMessages(sessionId: string, messages: NewMessage[], create: SessionLabels): Promise<TranscriptEntry[]> {
    checkSessionId(sessionId);
    if (!Array.isArray(messages)) throw new InvalidArgumentError("messages must be a list");
    const run = this.db.transaction((): TranscriptEntry[] => {
      const now = Date.now();
      const row = this.stmts.session.get(sessionId) ?? this.insertSession(sessionId, create, now);
      const out = messages.map((m, i) => this.appendMessage(row, newEntryId(), m.message, m.tokenCount, now, i));
      this.saveSession(row, now);
      return out;
    });
    return run.immediate();
  }

  async createSession(sessionId: string, labels: SessionLabels, seed: SeedEntry[]): Promise<SessionRecord> {
    checkSessionId(sessionId);
    if (!Array.isArray(seed)) throw new InvalidArgumentError("seed must be a list");
    const run = this.db.transaction((): SessionRecord => {
      if (this.stmts.session.get(sessionId)) {
        throw new AlreadyExistsError(`session ${sessionId} already exists`);
      }
      const now = Date.now();
      const row = this.insertSession(sessionId, labels, now);
      // Ids are assigned up front so that a seed compaction may name any seed message as its first kept entry.
      const ids = seed.map(() => newEntryId());
      seed.forEach((s, i) => {
        if (s.kind === "message") {
          this.appendMessage(row, ids[i], s.message, s.tokenCount, now, i);
          return;
        }
        if (s.kind !== "compaction") {
          throw new InvalidArgumentError(`seed entry ${i}: unknown kind ${String((s as { kind: unknown }).kind)}`);
        }
        let firstKeptId = "";
        let firstKeptSeq: number | null = null;
        if (s.firstKeptIndex !== null && s.firstKeptIndex !== undefined) {
          const k = s.firstKeptIndex;
          // A new session's seed entry k gets seq k + 1.
          if (!Number.isInteger(k) || k < 0 || k >= seed.length || seed[k].kind !== "message" || k + 1 < row.active_from_seq) {
            throw new InvalidArgumentError(
              `seed entry ${i}: firstKeptIndex ${String(k)} is not a seed message of session ${sessionId}'s active view`,
            );
          }
          firstKeptId = ids[k];
          firstKeptSeq = k + 1;
        }
        const compaction = { ...s.compaction, firstKeptEntryId: firstKeptId };
        this.appendCompaction(row, ids[i], compaction, s.summaryTokens, firstKeptSeq, now, `seed entry ${i}`);
      });
      this.saveSession(row, now);
      return toSessionRecord(row);
    });
    return run.immediate();
  }

  async getSession(sessionId: string): Promise<SessionRecord | undefined> {
    const row = this.stmts.session.get(sessionId);
    return row ? toSessionRecord(row) : undefined;
  }

  async listSessions(limit: number, cursor?: string): Promise<{ sessions: SessionRecord[]; nextCursor: string }> {
    const n = !Number.isInteger(limit) || limit <= 0 ? DEFAULT_LIST_LIMIT : Math.min(limit, MAX_LIST_LIMIT);
    let rows: SessionRow[];
    if (cursor) {
      const at = cursor.indexOf(":");
      const updatedAtMs = Number(cursor.slice(0, at));
      if (at <= 0 || !Number.isSafeInteger(updatedAtMs)) {
        throw new InvalidArgumentError(`invalid session list cursor "${cursor}"`);
      }
      rows = this.stmts.listAfter.all({ u: updatedAtMs, s: cursor.slice(at + 1), n: n + 1 });
    } else {
      rows = this.stmts.listFirst.all(n + 1);
    }
    const more = rows.length > n;
    if (more) rows = rows.slice(0, n);
    const last = rows[rows.length - 1];
    return {
      sessions: rows.map(toSessionRecord),
      nextCursor: more && last ? `${last.updated_at_ms}:${last.session_id}` : "",
    };
  }

  async readEntries(sessionId: string, afterSeq: number, limit: number): Promise<TranscriptEntry[]> {
    const after = Number.isInteger(afterSeq) && afterSeq > 0 ? afterSeq : 0;
    const n = Number.isInteger(limit) && limit > 0 ? limit : DEFAULT_READ_LIMIT;
    const run = this.db.transaction((): TranscriptEntry[] => {
      const rows = this.stmts.entriesAfter.all(sessionId, after, n);
      if (rows.length === 0 && !this.stmts.session.get(sessionId)) {
        throw new NotFoundError(`session ${sessionId} not found`);
      }
      return rows.map((r) => decodeEntry(r.payload));
    });
    return run.deferred();
  }

  async readActiveView(sessionId: string): Promise<ActiveView | undefined> {
    const run = this.db.transaction((): ActiveView | undefined => {
      const row = this.stmts.session.get(sessionId);
      if (!row) return undefined;
      let compaction: ActiveView["compaction"];
      let tokens = 0;
      if (row.latest_compaction_seq > 0) {
        const c = this.stmts.entryBySeq.get(sessionId, row.latest_compaction_seq);
        if (!c) throw new Error(`session ${sessionId}: compaction entry seq ${row.latest_compaction_seq} is missing`);
        compaction = { entry: decodeEntry(c.payload), summaryTokens: row.active_summary_tokens };
        tokens += row.active_summary_tokens;
      }
      const messages = this.stmts.activeMessages.all(sessionId, row.active_from_seq).map(toViewMessage);
      for (const m of messages) tokens += m.tokenCount;
      return { session: toSessionRecord(row), ...(compaction ? { compaction } : {}), messages, tokens };
    });
    return run.deferred();
  }

  async commitCompaction(
    sessionId: string,
    compaction: CompactionEntry,
    expectedLatestCompactionId: string,
    summaryTokens: number,
  ): Promise<TranscriptEntry> {
    const run = this.db.transaction((): TranscriptEntry => {
      const row = this.stmts.session.get(sessionId);
      if (!row) throw new NotFoundError(`session ${sessionId} not found`);
      const expected = expectedLatestCompactionId ?? "";
      if (row.latest_compaction_id !== expected) {
        throw new ConflictError(
          `session ${sessionId}: compaction expected latest compaction "${expected}" but it is ` +
            `"${row.latest_compaction_id}"; another compaction committed first`,
        );
      }
      const firstKeptId = compaction.firstKeptEntryId ?? "";
      let firstKeptSeq: number | null = null;
      if (firstKeptId !== "") {
        const kept = this.stmts.entryById.get(sessionId, firstKeptId);
        if (!kept || kept.kind !== "message" || kept.seq < row.active_from_seq) {
          throw new InvalidArgumentError(
            `first_kept_entry_id ${firstKeptId} is not a message of session ${sessionId}'s active view`,
          );
        }
        firstKeptSeq = kept.seq;
      }
      const now = Date.now();
      const entry = this.appendCompaction(row, newEntryId(), compaction, summaryTokens, firstKeptSeq, now, "compaction");
      this.saveSession(row, now);
      return entry;
    });
    return run.immediate();
  }

  async deleteSession(sessionId: string): Promise<boolean> {
    const run = this.db.transaction((): boolean => {
      this.stmts.deleteRevisions.run(sessionId);
      this.stmts.deleteEntries.run(sessionId);
      return this.stmts.deleteSession.run(sessionId).changes > 0;
    });
    return run.immediate();
  }

  async rewriteEntries(sessionId: string, rewrites: EntryRewriteInput[], reason: string): Promise<RewriteOutcome> {
    checkSessionId(sessionId);
    if (!Array.isArray(rewrites)) throw new InvalidArgumentError("rewrites must be a list");
    const why = typeof reason === "string" ? reason : "";
    const run = this.db.transaction((): RewriteOutcome => {
      const row = this.stmts.session.get(sessionId);
      if (!row) throw new NotFoundError(`session ${sessionId} not found`);
      // Resolve and encode every rewrite before writing anything.
      const seen = new Set<string>();
      const planned = rewrites.map((r, i) => {
        const id: unknown = r?.entryId;
        if (typeof id !== "string" || id === "") throw new InvalidArgumentError(`rewrite ${i}: entry_id is required`);
        if (seen.has(id)) throw new InvalidArgumentError(`entry ${id} is rewritten more than once in one request`);
        seen.add(id);
        const target = this.stmts.rewriteTarget.get(sessionId, id);
        if (!target || target.kind !== "message") {
          throw new InvalidArgumentError(`entry ${id} is not a message entry of session ${sessionId}`);
        }
        const previous = decodeEntry(target.payload);
        const next = rewrittenEntryRow(sessionId, target.seq, previous, r.message, r.tokenCount, `rewrite of entry ${id}`);
        return { id, target, previous, next };
      });
      if (planned.length === 0) return { rewrittenEntries: 0, bytesFreed: 0 };
      const now = Date.now();
      let tokenDelta = 0;
      let bytesFreed = 0;
      for (const p of planned) {
        this.stmts.insertRevision.run({
          session_id: sessionId,
          entry_id: p.id,
          revision: p.previous.revision ?? 0,
          token_count: p.target.token_count,
          replaced_at_ms: now,
          reason: why,
          payload: p.target.payload,
        });
        this.stmts.updateEntry.run(p.next.row);
        tokenDelta += p.next.row.token_count - p.target.token_count;
        bytesFreed += p.target.payload.length - p.next.row.payload.length;
      }
      row.total_tokens += tokenDelta;
      this.saveSession(row, now);
      return { rewrittenEntries: planned.length, bytesFreed: Math.max(0, bytesFreed) };
    });
    return run.immediate();
  }

  async readEntryRevisions(sessionId: string, entryId: string): Promise<EntryRevision[]> {
    const run = this.db.transaction((): EntryRevision[] => {
      const rows = this.stmts.revisions.all(sessionId, entryId);
      if (rows.length === 0) {
        if (!this.stmts.session.get(sessionId)) throw new NotFoundError(`session ${sessionId} not found`);
        if (!this.stmts.entryById.get(sessionId, entryId)) {
          throw new NotFoundError(`entry ${entryId} not found in session ${sessionId}`);
        }
      }
      return rows.map(toEntryRevision);
    });
    return run.deferred();
  }

  async setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void> {
    checkTokenCount(tokens, "system addition tokens");
    if (this.stmts.setSystemAdditionTokens.run(tokens, sessionId).changes === 0) {
      throw new NotFoundError(`session ${sessionId} not found`);
    }
  }

  // --- RegistryStore ---------------------------------------------------------------------------

  async saveRegistration(registration: StoredRegistration): Promise<void> {
    this.stmts.saveRegistration.run(registrationRow(registration));
  }

  async deleteRegistration(engineId: string): Promise<boolean> {
    return this.stmts.deleteRegistration.run(engineId).changes > 0;
  }

  async listRegistrations(): Promise<StoredRegistration[]> {
    return this.stmts.listRegistrations.all().map(toStoredRegistration);
  }

  async saveQuarantine(engineId: string, quarantine: QuarantineState): Promise<void> {
    this.stmts.saveQuarantine.run(quarantineRow(engineId, quarantine, Date.now()));
  }

  async clearQuarantine(engineId: string): Promise<boolean> {
    return this.stmts.clearQuarantine.run(engineId).changes > 0;
  }

  async listQuarantines(): Promise<Map<string, QuarantineState>> {
    const out = new Map<string, QuarantineState>();
    for (const r of this.stmts.listQuarantines.all()) out.set(r.engine_id, QuarantineState.decode(r.payload));
    return out;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  // --- inside transactions -------------------------------------------------------------------

  private insertSession(sessionId: string, labels: SessionLabels | undefined, now: number): SessionRow {
    const row = newSessionRow(sessionId, labels, now);
    this.stmts.insertSession.run(row);
    return row;
  }

  /** Inserts a message entry after the session's last entry and advances `row` (in memory). */
  private appendMessage(
    row: SessionRow,
    id: string,
    message: NewMessage["message"],
    tokenCount: number,
    now: number,
    index: number,
  ): TranscriptEntry {
    const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
    const built = messageEntryRow(pos, id, message, tokenCount, now, `message ${index}`);
    this.stmts.insertEntry.run(built.row);
    row.last_seq = pos.seq;
    row.last_entry_id = id;
    row.entry_count += 1;
    row.message_count += 1;
    row.total_tokens += tokenCount;
    return built.entry;
  }

  /** Inserts a compaction entry and moves the active view of `row` (in memory). */
  private appendCompaction(
    row: SessionRow,
    id: string,
    compaction: CompactionEntry,
    summaryTokens: number,
    firstKeptSeq: number | null,
    now: number,
    what: string,
  ): TranscriptEntry {
    const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
    const built = compactionEntryRow(pos, id, compaction, summaryTokens, now, what);
    this.stmts.insertEntry.run(built.row);
    row.last_seq = pos.seq;
    row.last_entry_id = id;
    row.entry_count += 1;
    row.compaction_count += 1;
    row.latest_compaction_id = id;
    row.latest_compaction_seq = pos.seq;
    row.active_from_seq = firstKeptSeq ?? pos.seq + 1;
    row.active_summary_tokens = summaryTokens;
    return built.entry;
  }

  private saveSession(row: SessionRow, now: number): void {
    row.updated_at_ms = Math.max(row.updated_at_ms, now);
    this.stmts.saveSession.run(row);
  }
}

function checkSessionId(sessionId: string): void {
  if (typeof sessionId !== "string" || sessionId === "") {
    throw new InvalidArgumentError("session_id is required");
  }
}
