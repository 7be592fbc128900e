import Database from "better-sqlite3";

import { SessionNotFoundError } from "../../contract/errors.js";
import type { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import type { CompactionEntry, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { RegistrationClaim, RegistryChange, RegistryStore, RegistryWatch, RegistryWatchOptions, StoredRegistration } from "../registry-store.js";
import { ALL_AGENTS } from "../types.js";
import type {
  ActiveTotals,
  AgentScope,
  ActiveView,
  EntryRevision,
  EntryRewriteInput,
  ExpiredSubagent,
  IdempotencyKey,
  IdempotentAppend,
  KeyedAppend,
  ImportedTranscript,
  NewMessage,
  RawEntry,
  RawIdempotencyKey,
  RawRegistry,
  RawRevision,
  RawSession,
  RawWriter,
  RewriteOutcome,
  SearchCandidate,
  SeedEntry,
  SessionLabels,
  SessionRecord,
  StoreCopy,
  StoreRowCounts,
  StoreSearch,
  SubagentEnd,
  SubagentState,
  TranscriptStore,
} from "../types.js";
import { decodeActiveView, readActiveViewRows } from "./active-view-read.js";
import { GroupCommit } from "./group-commit.js";
import { WalSync } from "./wal-sync.js";
import { appendIdempotentInTransaction, appendKeyedInTransaction } from "./idempotent-append.js";
import { checkIdempotencyKey } from "../idempotency-replay.js";
import { migrate } from "./migrations.js";
import { importSession } from "./session-import.js";
import * as registry from "./registry-records.js";
import { checkTokenCount, toSessionRecord } from "../rows.js";
import { prepareStatements, type Statements } from "./statements.js";
import { SqliteStoreCopy } from "./store-copy.js";
import { SqliteAuditRecords } from "./audit-records.js";
import type { AgentUsage, AuditQuery, AuditRecord, ReservationChange, StoredAuditRecord } from "../audit-records.js";
import { SqliteSearch } from "./search.js";
import { attachMemoryIndex, openIndexFile, searchIndexPath } from "./search-index.js";
import { InlineIndexing, startIndexThread, type SearchIndexing } from "./search-index-thread.js";
import { listPage, listPageSize, parseListCursor } from "../paging.js";
import { ViewCache } from "../view-cache.js";
import * as subagents from "./subagent-records.js";
import * as reads from "./transcript-reads.js";
import * as writes from "./transcript-writes.js";
import { checkAppend } from "../write-checks.js";
import { SqliteDeletions } from "./deletion-records.js";
import type { DeleteOptions, ExpiringSession, ForgetDelivery, ForgetOutcome, RetentionRule, SessionDeletion } from "../deletions.js";

/** ForgetReason.FORGET_REASON_DELETED (engine.proto). */
const FORGET_DELETED = 1;

export { newEntryId } from "../rows.js";

const BUSY_TIMEOUT_MS = 5_000;

/** Log rows the search index may be behind before appends wait for it (~1.5 s of the indexer's work here). */
export const MAX_INDEX_LAG = 20_000;

/**
 * The embedded transcript store: one SQLite file (WAL, synchronous=FULL, so an acknowledged write
 * survives kill -9 and power loss). better-sqlite3 is synchronous; the async methods only adapt it
 * to the TranscriptStore interface. Every write runs in one IMMEDIATE transaction.
 *
 * The session row carries the derived pointers of the active view (latest compaction seq, the seq
 * the view starts from, summary tokens, last entry id), so appends and readActiveView never touch
 * history outside the active view: their cost does not grow with the length of the transcript. The
 * one exception, the pinned system messages before the cut (docs/pinned-messages.md), is read
 * through a partial index that holds only system message entries.
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
 * Lists are ordered by engine id. And it is a StoreCopy (store-copy.ts), for contextctl migrate-store.
 *
 * The class is the façade: the transcript reads (transcript-reads.ts), writes (transcript-writes.ts)
 * and the registry records (registry-records.ts) are delegated, all sharing one connection's
 * statements; each read runs in one deferred transaction, so it sees one snapshot.
 * readActiveView answers from a cache of decoded views, extended on appends and checked against the
 * session row and SQLite's data_version on every read (view-cache.ts, active-view-read.ts).
 */
export class SqliteStore implements TranscriptStore, RegistryStore, StoreCopy {
  readonly kind = "sqlite" as const;

  private readonly stmts: Statements;
  private readonly commits: GroupCommit;
  private readonly walSync: WalSync | undefined;
  private readonly copy: SqliteStoreCopy;
  private readonly audit: SqliteAuditRecords;
  private readonly search: SqliteSearch;
  /** The search indexer (search-index.ts) and what the searches read with. */
  private readonly indexing: SearchIndexing;
  private readonly searchReader: Database.Database;
  /** The search log's rows up to this op are deleted, or their deletion is under way. */
  private trimmedLog = 0;
  private readonly trims = new Set<Promise<void>>();
  private closing = false;
  /** Decoded active views (view-cache.ts); the writes that can change stored entries clear it. */
  private readonly views = new ViewCache();
  private readonly deletions: SqliteDeletions;

  private constructor(private readonly db: Database.Database) {
    this.stmts = prepareStatements(db);
    this.deletions = new SqliteDeletions(db);
    this.copy = new SqliteStoreCopy(db);
    this.audit = new SqliteAuditRecords(db);
    // Only a file in WAL mode has a -wal to sync (in memory, or where SQLite kept another journal
    // mode, the group's COMMIT stays at FULL).
    const wal = !db.memory && db.pragma("journal_mode", { simple: true }) === "wal";
    this.walSync = wal ? new WalSync(`${db.name}-wal`) : undefined;
    this.commits = new GroupCommit(db, this.walSync);
    ({ indexing: this.indexing, reader: this.searchReader } = SqliteStore.searchIndex(db));
    this.indexing.onApplied = (applied) => this.trimLog(applied);
    this.search = new SqliteSearch(db, this.searchReader, this.stmts, this.indexing);
  }

  /**
   * The search index: in the file beside the store, kept by a thread of its own (search-index.ts),
   * searched through a read-only connection; in memory, attached to the store's own connection.
   */
  private static searchIndex(db: Database.Database): { indexing: SearchIndexing; reader: Database.Database } {
    if (db.memory) {
      attachMemoryIndex(db);
      return { indexing: new InlineIndexing(db, "main", "ix", false), reader: db };
    }
    const indexPath = searchIndexPath(db.name);
    // Created here, before anything reads it; the indexer opens its own connection.
    const own = openIndexFile(indexPath, db.name);
    const thread = startIndexThread(db.name, indexPath);
    let indexing: SearchIndexing;
    if (thread) {
      own.close();
      indexing = thread;
    } else indexing = new InlineIndexing(own, "src", "main", true);
    const reader = new Database(db.name, { readonly: true });
    reader.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    reader.prepare("ATTACH DATABASE ? AS ix").run(indexPath);
    return { indexing, reader };
  }

  /** The indexer applied the log through `applied`: its rows are deleted in the next group commit (with the appends of that turn, its sync off the event loop). */
  private trimLog(applied: number): void {
    if (applied <= this.trimmedLog || this.closing) return;
    this.trimmedLog = applied;
    const trim = this.commits
      .write(() => this.stmts.trimSearchLog.run(applied))
      .then(
        () => undefined,
        () => {
          // Left for the next trim: the rows stay until then, and are never applied twice.
          this.trimmedLog = Math.min(this.trimmedLog, applied - 1);
        },
      );
    this.trims.add(trim);
    void trim.finally(() => this.trims.delete(trim));
  }

  /** indexed, for a write that commits before it returns. */
  private indexedNow<T>(write: () => T): T {
    try {
      return write();
    } finally {
      this.indexing.kick();
    }
  }

  /**
   * Tells the indexer that `write` logged entries, once it has committed; and holds the answer while
   * the index is more than MAX_INDEX_LAG log rows behind, so that the lag a search may wait for stays
   * bounded when appends outrun the indexer. (Never an error: the write has committed.)
   */
  private async indexed<T>(write: Promise<T>): Promise<T> {
    try {
      return await write;
    } finally {
      this.indexing.kick();
      const behind = (this.stmts.lastLogged.get()?.seq ?? 0) - MAX_INDEX_LAG;
      if (behind > 0 && !this.closing) await this.indexing.caughtUp(behind).catch(() => undefined);
    }
  }

  /** Opens (creating when missing) the database file at `path` and migrates it. */
  static open(path: string): SqliteStore {
    const db = new Database(path);
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.pragma("foreign_keys = ON");
      // A deleted session's content is overwritten in the file, not only unlinked (docs/operations.md,
      // "Deletion"): the pages it freed hold zeros, so no copy of the file keeps it.
      db.pragma("secure_delete = ON");
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

  /** Grouped with the other appends of this turn of the event loop into one transaction (group-commit.ts). */
  async appendMessages(sessionId: string, messages: NewMessage[], create: SessionLabels, maxEntries = Number.POSITIVE_INFINITY): Promise<TranscriptEntry[]> {
    checkAppend(sessionId, messages);
    return this.indexed(this.commits.write(() => writes.appendInTransaction(this.stmts, sessionId, messages, create, maxEntries)));
  }

  async appendIdempotent(
    sessionId: string,
    messages: NewMessage[],
    create: SessionLabels,
    key: IdempotencyKey,
    maxEntries?: number,
  ): Promise<IdempotentAppend> {
    checkAppend(sessionId, messages);
    checkIdempotencyKey(key);
    return this.indexed(this.commits.write(() => appendIdempotentInTransaction(this.stmts, sessionId, messages, create, key, maxEntries)));
  }

  async appendKeyed(sessionId: string, messages: NewMessage[], create: SessionLabels, key?: IdempotencyKey, maxEntries?: number): Promise<KeyedAppend> {
    checkAppend(sessionId, messages);
    if (key) checkIdempotencyKey(key);
    return this.indexed(this.commits.write(() => appendKeyedInTransaction(this.stmts, sessionId, messages, create, key, maxEntries)));
  }

  async importSession(sessionId: string, labels: SessionLabels, transcript: ImportedTranscript): Promise<SessionRecord> {
    return this.indexedNow(() => this.clearingViews(() => importSession(this.db, this.stmts, sessionId, labels, transcript)));
  }

  async createSession(sessionId: string, labels: SessionLabels, seed: SeedEntry[], options: { expiresAtMs?: number } = {}): Promise<SessionRecord> {
    return this.indexedNow(() => this.clearingViews(() => writes.createSession(this.db, this.stmts, sessionId, labels, seed, options.expiresAtMs ?? 0)));
  }

  async getSession(sessionId: string): Promise<SessionRecord | undefined> {
    const row = this.stmts.session.get(sessionId);
    return row ? toSessionRecord(row) : undefined;
  }

  async listSessions(limit: number, cursor?: string, agents: AgentScope = ALL_AGENTS): Promise<{ sessions: SessionRecord[]; nextCursor: string }> {
    const n = listPageSize(limit);
    const scope = { e: JSON.stringify(agents.exact), p: JSON.stringify(agents.prefixes), n: n + 1 };
    const after = cursor ? parseListCursor(cursor) : undefined;
    const rows = after ? this.stmts.listAfter.all({ u: after.updatedAtMs, s: after.sessionId, ...scope }) : this.stmts.listFirst.all(scope);
    return listPage(rows, n);
  }

  async readEntries(sessionId: string, afterSeq: number, limit: number): Promise<TranscriptEntry[]> {
    return this.db.transaction(() => reads.readEntries(this.stmts, sessionId, afterSeq, limit)).deferred();
  }

  async readActiveView(sessionId: string, agents?: AgentScope): Promise<ActiveView | undefined> {
    const read = this.db.transaction(() => readActiveViewRows(this.stmts, this.views, sessionId, agents)).deferred();
    return read && decodeActiveView(this.views, sessionId, read);
  }

  async searchCandidates(search: StoreSearch): Promise<SearchCandidate[]> {
    return this.search.candidates(search);
  }

  async readEntryById(sessionId: string, entryId: string): Promise<TranscriptEntry | undefined> {
    return this.search.entryById(sessionId, entryId);
  }

  async readPreviousCompaction(sessionId: string, beforeSeq: number): Promise<TranscriptEntry | undefined> {
    return this.search.previousCompaction(sessionId, beforeSeq);
  }

  async readActiveTotals(sessionId: string): Promise<ActiveTotals | undefined> {
    return this.db.transaction(() => reads.readActiveTotals(this.stmts, sessionId)).deferred();
  }

  async commitCompaction(
    sessionId: string,
    compaction: CompactionEntry,
    expectedLatestCompactionId: string,
    summaryTokens: number,
    compactedThroughSeq?: number,
  ): Promise<TranscriptEntry> {
    // In the group commit, like appends: its WAL sync runs off the event loop (a compaction per
    // Assemble of a busy tenant synced on the loop every other tenant's calls wait on).
    return this.indexed(
      this.commits.write(() =>
        writes.commitCompaction(this.db, this.stmts, sessionId, compaction, expectedLatestCompactionId, summaryTokens, compactedThroughSeq),
      ),
    );
  }

  async deleteSession(sessionId: string): Promise<boolean> {
    return (await this.deleteSessionTree(sessionId, { reason: FORGET_DELETED, atMs: Date.now(), keepSubagents: true })) !== undefined;
  }

  // --- deletion and retention (deletion-records.ts) ---------------------------------------------

  async deleteSessionTree(sessionId: string, options: DeleteOptions): Promise<SessionDeletion | undefined> {
    const run = this.db.transaction(() => this.deletions.deleteTree(sessionId, options));
    return this.indexedNow(() => this.clearingViews(() => run.immediate()));
  }

  async recordSessionEngine(sessionId: string, engineId: string, atMs: number): Promise<void> {
    this.deletions.recordSessionEngine(sessionId, engineId, atMs);
  }

  async readSessionEngines(sessionId: string): Promise<string[]> {
    return this.deletions.readSessionEngines(sessionId);
  }

  async claimForgetDeliveries(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<ForgetDelivery[]> {
    return this.deletions.claim(owner, nowMs, leaseMs, limit);
  }

  async settleForgetDelivery(delivery: ForgetDelivery, owner: string, outcome: ForgetOutcome): Promise<boolean> {
    return this.deletions.settle(delivery, owner, outcome);
  }

  async wakeForgetDeliveries(engineId: string, nowMs: number): Promise<number> {
    return this.deletions.wake(engineId, nowMs);
  }

  async countForgetDeliveries(): Promise<number> {
    return this.deletions.pending();
  }

  async tryLease(name: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
    return this.deletions.tryLease(name, owner, nowMs, ttlMs);
  }

  async listExpiringSessions(rule: RetentionRule, cutoffMs: number, limit: number): Promise<ExpiringSession[]> {
    return this.deletions.expiring(rule, cutoffMs, limit);
  }

  async rewriteEntries(sessionId: string, rewrites: EntryRewriteInput[], reason: string): Promise<RewriteOutcome> {
    return this.indexedNow(() => this.clearingViews(() => writes.rewriteEntries(this.db, this.stmts, sessionId, rewrites, reason)));
  }

  async readEntryRevisions(sessionId: string, entryId: string): Promise<EntryRevision[]> {
    return this.db.transaction(() => reads.readEntryRevisions(this.stmts, sessionId, entryId)).deferred();
  }

  // --- subagent TTLs (subagent-records.ts) ------------------------------------------------------

  async endSubagentSession(sessionId: string, reason: number, atMs: number): Promise<SubagentEnd> {
    return this.clearingViews(() => subagents.endSubagentSession(this.db, this.stmts, sessionId, reason, atMs));
  }

  async reopenSubagentSession(sessionId: string, atMs: number): Promise<boolean> {
    return this.clearingViews(() => subagents.reopenSubagentSession(this.stmts, sessionId, atMs));
  }

  async claimExpiredSubagents(nowMs: number, limit: number): Promise<ExpiredSubagent[]> {
    return this.clearingViews(() => subagents.claimExpiredSubagents(this.db, this.stmts, nowMs, limit));
  }

  async readSubagentState(sessionId: string): Promise<SubagentState | undefined> {
    return subagents.readSubagentState(this.stmts, sessionId);
  }

  async setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void> {
    checkTokenCount(tokens, "system addition tokens");
    if (this.stmts.setSystemAdditionTokens.run(tokens, sessionId).changes === 0) {
      throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    }
  }

  async countSessions(): Promise<number> {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM sessions").get() as { n: number }).n;
  }

  async agentUsage(agentId: string): Promise<AgentUsage> {
    return this.db.transaction(() => this.audit.agentUsage(agentId)).deferred();
  }

  // --- the audit trail (audit-records.ts) -------------------------------------------------------

  /** In the group commit: durable before it resolves, its sync off the event loop. */
  async appendAudit(record: AuditRecord): Promise<void> {
    await this.commits.write(() => this.audit.append(record));
  }

  async listAudit(query: AuditQuery): Promise<StoredAuditRecord[]> {
    return this.audit.list(query);
  }

  async pruneAudit(beforeMs: number, limit: number): Promise<number> {
    return this.audit.pruneBefore(beforeMs, limit);
  }

  async syncReservations(reservations: ReadonlyMap<string, string>, atMs: number): Promise<ReservationChange[]> {
    return this.audit.syncReservations(reservations, atMs);
  }

  /** The file is local: answering at all is the whole check. */
  async ping(): Promise<void> {
    this.db.prepare("SELECT 1").get();
  }

  // --- RegistryStore ---------------------------------------------------------------------------

  async claimRegistration(registration: StoredRegistration, options: { refresh: boolean }): Promise<RegistrationClaim> {
    return registry.claimRegistration(this.db, this.stmts, registration, options.refresh);
  }

  async deleteRegistration(engineId: string, instanceId?: string, options: { registeredAtMs?: number } = {}): Promise<boolean> {
    return registry.deleteRegistration(this.db, this.stmts, engineId, instanceId, options.registeredAtMs);
  }

  async listRegistrations(): Promise<StoredRegistration[]> {
    return registry.listRegistrations(this.stmts);
  }

  async saveQuarantine(engineId: string, quarantine: QuarantineState, instanceId?: string): Promise<void> {
    registry.saveQuarantine(this.stmts, engineId, quarantine, instanceId);
  }

  async clearQuarantine(engineId: string, instanceId?: string): Promise<boolean> {
    return registry.clearQuarantine(this.db, this.stmts, engineId, instanceId);
  }

  async listQuarantines(): Promise<Map<string, QuarantineState>> {
    return registry.listQuarantines(this.stmts);
  }

  async listInstanceQuarantines(): Promise<Map<string, Map<string, QuarantineState>>> {
    return registry.listInstanceQuarantines(this.stmts);
  }

  /** One process owns the file: nobody else changes the records, so there is nothing to watch. */
  watchRegistry(_onChange: (change: RegistryChange) => void, _options?: RegistryWatchOptions): RegistryWatch {
    return { shared: false, connected: true, close: async () => {} };
  }

  // --- StoreCopy (store-copy.ts) --------------------------------------------------------------

  async countRows(): Promise<StoreRowCounts> {
    return this.copy.countRows();
  }
  async listSessionIds(afterId: string, limit: number): Promise<string[]> {
    return this.copy.listSessionIds(afterId, limit);
  }
  async readRawSession(sessionId: string): Promise<RawSession | undefined> {
    return this.copy.readRawSession(sessionId);
  }
  async readRawEntries(sessionId: string, afterSeq: number, limit: number): Promise<RawEntry[]> {
    return this.copy.readRawEntries(sessionId, afterSeq, limit);
  }
  async readRawRevisions(sessionId: string, after: { entryId: string; revision: number } | null, limit: number): Promise<RawRevision[]> {
    return this.copy.readRawRevisions(sessionId, after, limit);
  }
  async readRawIdempotencyKeys(sessionId: string, afterKey: string, limit: number): Promise<RawIdempotencyKey[]> {
    return this.copy.readRawIdempotencyKeys(sessionId, afterKey, limit);
  }
  async readRawRegistry(): Promise<RawRegistry> {
    return this.copy.readRawRegistry();
  }
  async beginRawWrite(): Promise<RawWriter> {
    return this.clearingViews(() => this.copy.beginRawWrite(this.db.name));
  }

  /**
   * Runs a write that may change stored entries without moving the session row's view fields
   * (view-cache.ts), then clears the cached views, whether it succeeded or not.
   */
  private clearingViews<T>(write: () => T): T {
    try {
      return write();
    } finally {
      this.views.clear();
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.indexing.close();
    await Promise.all(this.trims);
    if (this.searchReader !== this.db && this.searchReader.open) this.searchReader.close();
    await this.walSync?.close();
    if (this.db.open) this.db.close();
  }
}
