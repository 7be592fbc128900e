import Database from "better-sqlite3";

import {
  AlreadyExistsError,
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
} from "../../contract/errors.js";
import type { CompactionEntry, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type {
  ActiveView,
  NewMessage,
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
  toSessionRecord,
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
 * - updated_at_ms moves on appends and compactions only (not on setSystemAdditionTokens).
 */
export class SqliteStore implements TranscriptStore {
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
      this.stmts.deleteEntries.run(sessionId);
      return this.stmts.deleteSession.run(sessionId).changes > 0;
    });
    return run.immediate();
  }

  async setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void> {
    checkTokenCount(tokens, "system addition tokens");
    if (this.stmts.setSystemAdditionTokens.run(tokens, sessionId).changes === 0) {
      throw new NotFoundError(`session ${sessionId} not found`);
    }
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
