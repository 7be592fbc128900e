import { ContextdError, FailedPreconditionError, NotFoundError, SessionNotFoundError } from "../../contract/errors.js";
import * as audit from "./audit-records.js";
import type { AgentUsage, AuditQuery, AuditRecord, ReservationChange, StoredAuditRecord } from "../audit-records.js";
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
import { count, PgDatabase, run } from "./database.js";
import * as deletions from "./deletion-records.js";
import type { DeleteOptions, ExpiringSession, ForgetDelivery, ForgetOutcome, RetentionRule, SessionDeletion } from "../deletions.js";
import { listPage, listPageSize, parseListCursor, readWindow } from "../paging.js";
import { ViewCache } from "../view-cache.js";
import { readActiveView } from "./active-view-read.js";
import { appendIdempotent, appendKeyed } from "./idempotent-append.js";
import { migrate, type MigrationOutcome } from "./migrations.js";
import { createPool, parsePostgresUrl, type ParsedPostgresUrl } from "./pool-config.js";
import { RegistryListener } from "./registry-listener.js";
import * as registry from "./registry-records.js";
import { checkTokenCount, decodeEntry, sessionFromJson, toEntryRevision, toSessionRecord, type SessionRow } from "./rows.js";
import { importSession } from "./session-import.js";
import { SQL } from "./statements.js";
import * as copy from "./store-copy.js";
import * as search_ from "./search.js";
import * as subagents from "./subagent-records.js";
import * as writes from "./transcript-writes.js";

/**
 * The transcript and registry store on PostgreSQL, for several contextd replicas sharing one
 * database (docs/deployment.md, "Running several replicas"). It behaves exactly as SqliteStore —
 * every "behaviour where the interface is silent" listed there holds here too, with the same errors
 * and messages — and adds what sharing needs:
 *
 * - Writers of one session serialize on its row (`SELECT … FOR UPDATE`, created race-free with
 *   `INSERT … ON CONFLICT DO NOTHING`), so seqs stay contiguous and each writer's order holds
 *   whichever replica it writes through; limits are checked under that lock.
 * - Idempotency keys are a primary key: of two concurrent requests with one key, one writes and the
 *   other answers replayed (idempotent-append.ts).
 * - Compaction commits are optimistic on the session row's latest compaction id (ConflictError).
 * - Each read is one statement (one snapshot): readActiveView reads the session row, its latest
 *   compaction and the message range of the view together — or, for a view this replica has
 *   decoded before, the row and what was appended since, while the row's `view_revision` (which
 *   the database moves on any other change to the session's entries, migration 4) says the cached
 *   view still holds (active-view-read.ts). So what one replica commits is what the next call on
 *   any replica reads.
 * - A lost or refused connection is UnavailableError naming PostgreSQL and the cause (errors.ts);
 *   a call that had not committed runs again on a fresh connection (database.ts).
 *
 * Connection and pool settings come from the URL (pool-config.ts: `?pool_max=…` and friends).
 * Commits are as durable as the server's `synchronous_commit` makes them (the default, `on`,
 * waits for the WAL flush before the promise resolves).
 */
export class PostgresStore implements TranscriptStore, RegistryStore, StoreCopy {
  readonly kind = "postgres" as const;

  /** Open registry watches (watchRegistry), closed with the store. */
  private readonly watches = new Set<RegistryListener>();

  private constructor(
    private readonly db: PgDatabase,
    /** What open() found and did to the schema. */
    readonly migration: MigrationOutcome,
    private readonly parsed: ParsedPostgresUrl,
    /** Decoded active views of recently assembled sessions, checked against the row on every read (view-cache.ts). */
    private readonly views: ViewCache,
  ) {}

  /**
   * Connects to the database a `postgres://` URL names and migrates it (see pool-config.ts for the
   * URL). `viewCacheBytes` bounds the cache of decoded views (default VIEW_CACHE_BYTES; 0: none).
   */
  static async open(url: string, options: { viewCacheBytes?: number } = {}): Promise<PostgresStore> {
    const parsed = parsePostgresUrl(url);
    const db = new PgDatabase(createPool(parsed), parsed.where, parsed.settings.poolMax);
    try {
      return new PostgresStore(db, await migrate(db), parsed, new ViewCache(options.viewCacheBytes));
    } catch (err) {
      await db.end();
      if (err instanceof ContextdError) throw err;
      // Bad credentials, a missing database, no permission to create tables: nothing a retry fixes.
      throw new FailedPreconditionError(`PostgreSQL store at ${parsed.where} cannot be opened: ${(err as Error).message}`);
    }
  }

  /** `host:port/database` (no credentials). */
  get where(): string {
    return this.db.where;
  }

  async appendMessages(sessionId: string, messages: NewMessage[], create: SessionLabels, maxEntries?: number): Promise<TranscriptEntry[]> {
    return writes.appendMessages(this.db, sessionId, messages, create, maxEntries);
  }

  async appendIdempotent(
    sessionId: string,
    messages: NewMessage[],
    create: SessionLabels,
    key: IdempotencyKey,
    maxEntries?: number,
  ): Promise<IdempotentAppend> {
    return appendIdempotent(this.db, sessionId, messages, create, key, maxEntries);
  }

  async appendKeyed(sessionId: string, messages: NewMessage[], create: SessionLabels, key?: IdempotencyKey, maxEntries?: number): Promise<KeyedAppend> {
    return appendKeyed(this.db, sessionId, messages, create, key, maxEntries);
  }

  async importSession(sessionId: string, labels: SessionLabels, transcript: ImportedTranscript): Promise<SessionRecord> {
    return importSession(this.db, sessionId, labels, transcript);
  }

  async createSession(sessionId: string, labels: SessionLabels, seed: SeedEntry[], options: { expiresAtMs?: number } = {}): Promise<SessionRecord> {
    return writes.createSession(this.db, sessionId, labels, seed, options.expiresAtMs ?? 0);
  }

  async getSession(sessionId: string): Promise<SessionRecord | undefined> {
    const [row] = await this.db.read((conn) => run<SessionRow>(conn, SQL.session, [sessionId]));
    return row ? toSessionRecord(row) : undefined;
  }

  async listSessions(limit: number, cursor?: string, agents: AgentScope = ALL_AGENTS): Promise<{ sessions: SessionRecord[]; nextCursor: string }> {
    const n = listPageSize(limit);
    const scope = [[...agents.exact], [...agents.prefixes]];
    const after = cursor ? parseListCursor(cursor) : undefined;
    const values = after ? [after.updatedAtMs, after.sessionId, n + 1, ...scope] : [n + 1, ...scope];
    const rows = await this.db.read((conn) => run<SessionRow>(conn, after ? SQL.listAfter : SQL.listFirst, values));
    return listPage(rows, n);
  }

  async readEntries(sessionId: string, afterSeq: number, limit: number): Promise<TranscriptEntry[]> {
    const { after, n } = readWindow(afterSeq, limit);
    return this.db.read(async (conn) => {
      const rows = await run<{ payload: Buffer }>(conn, SQL.entriesAfter, [sessionId, after, n]);
      if (rows.length === 0 && (await run(conn, SQL.sessionExists, [sessionId])).length === 0) {
        throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
      }
      return rows.map((r) => decodeEntry(r.payload));
    });
  }

  async searchCandidates(search: StoreSearch): Promise<SearchCandidate[]> {
    return search_.searchCandidates(this.db, search);
  }

  async readEntryById(sessionId: string, entryId: string): Promise<TranscriptEntry | undefined> {
    return search_.readEntryById(this.db, sessionId, entryId);
  }

  async readPreviousCompaction(sessionId: string, beforeSeq: number): Promise<TranscriptEntry | undefined> {
    return search_.readPreviousCompaction(this.db, sessionId, beforeSeq);
  }

  async readActiveView(sessionId: string, agents?: AgentScope): Promise<ActiveView | undefined> {
    return readActiveView(this.db, this.views, sessionId, agents);
  }

  async readActiveTotals(sessionId: string): Promise<ActiveTotals | undefined> {
    type Row = { part: number; session: string | null; role: number; tokens: number };
    const rows = await this.db.read((conn) => run<Row>(conn, SQL.activeTotals, [sessionId]));
    if (rows.length === 0) return undefined;
    const row = sessionFromJson(rows[0].session!);
    const summaryTokens = row.latest_compaction_seq > 0 ? row.active_summary_tokens : 0;
    const tokensByRole = new Map<number, number>();
    let tokens = summaryTokens;
    for (const r of rows.slice(1)) {
      tokensByRole.set(r.role, r.tokens);
      tokens += r.tokens;
    }
    return { session: toSessionRecord(row), summaryTokens, tokensByRole, tokens };
  }

  async commitCompaction(
    sessionId: string,
    compaction: CompactionEntry,
    expectedLatestCompactionId: string,
    summaryTokens: number,
    compactedThroughSeq?: number,
  ): Promise<TranscriptEntry> {
    return writes.commitCompaction(this.db, sessionId, compaction, expectedLatestCompactionId, summaryTokens, compactedThroughSeq);
  }

  async deleteSession(sessionId: string): Promise<boolean> {
    // ForgetReason.FORGET_REASON_DELETED
    return (await this.deleteSessionTree(sessionId, { reason: 1, atMs: Date.now(), keepSubagents: true })) !== undefined;
  }

  // --- deletion and retention (deletion-records.ts) ---------------------------------------------

  async deleteSessionTree(sessionId: string, options: DeleteOptions): Promise<SessionDeletion | undefined> {
    return deletions.deleteSessionTree(this.db, sessionId, options);
  }
  async recordSessionEngine(sessionId: string, engineId: string, atMs: number): Promise<void> {
    return deletions.recordSessionEngine(this.db, sessionId, engineId, atMs);
  }
  async readSessionEngines(sessionId: string): Promise<string[]> {
    return deletions.readSessionEngines(this.db, sessionId);
  }
  async claimForgetDeliveries(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<ForgetDelivery[]> {
    return deletions.claimForgetDeliveries(this.db, owner, nowMs, leaseMs, limit);
  }
  async settleForgetDelivery(delivery: ForgetDelivery, owner: string, outcome: ForgetOutcome): Promise<boolean> {
    return deletions.settleForgetDelivery(this.db, delivery, owner, outcome);
  }
  async wakeForgetDeliveries(engineId: string, nowMs: number): Promise<number> {
    return deletions.wakeForgetDeliveries(this.db, engineId, nowMs);
  }
  async countForgetDeliveries(): Promise<number> {
    return deletions.countForgetDeliveries(this.db);
  }
  async tryLease(name: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
    return deletions.tryLease(this.db, name, owner, nowMs, ttlMs);
  }
  async listExpiringSessions(rule: RetentionRule, cutoffMs: number, limit: number): Promise<ExpiringSession[]> {
    return deletions.listExpiringSessions(this.db, rule, cutoffMs, limit);
  }

  async rewriteEntries(sessionId: string, rewrites: EntryRewriteInput[], reason: string): Promise<RewriteOutcome> {
    return writes.rewriteEntries(this.db, sessionId, rewrites, reason);
  }

  async readEntryRevisions(sessionId: string, entryId: string): Promise<EntryRevision[]> {
    return this.db.read(async (conn) => {
      const rows = await run<{ payload: Buffer; replaced_at_ms: number; reason: string }>(conn, SQL.revisions, [sessionId, entryId]);
      if (rows.length === 0) {
        if ((await run(conn, SQL.sessionExists, [sessionId])).length === 0) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
        if ((await run(conn, SQL.entryById, [sessionId, entryId])).length === 0) {
          throw new NotFoundError(`entry ${entryId} not found in session ${sessionId}`);
        }
      }
      return rows.map(toEntryRevision);
    });
  }

  // --- subagent TTLs (subagent-records.ts) ------------------------------------------------------

  async endSubagentSession(sessionId: string, reason: number, atMs: number): Promise<SubagentEnd> {
    return subagents.endSubagentSession(this.db, sessionId, reason, atMs);
  }

  async reopenSubagentSession(sessionId: string, atMs: number): Promise<boolean> {
    return subagents.reopenSubagentSession(this.db, sessionId, atMs);
  }

  async claimExpiredSubagents(nowMs: number, limit: number): Promise<ExpiredSubagent[]> {
    return subagents.claimExpiredSubagents(this.db, nowMs, limit);
  }

  async readSubagentState(sessionId: string): Promise<SubagentState | undefined> {
    return subagents.readSubagentState(this.db, sessionId);
  }

  async setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void> {
    checkTokenCount(tokens, "system addition tokens");
    const changed = await this.db.transaction((conn) => count(conn, SQL.setSystemAdditionTokens, [sessionId, tokens]));
    if (changed === 0) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
  }

  async ping(): Promise<void> {
    await this.db.ping();
  }

  async agentUsage(agentId: string): Promise<AgentUsage> {
    return audit.agentUsage(this.db, agentId);
  }

  // --- the audit trail (audit-records.ts) -------------------------------------------------------

  async appendAudit(record: AuditRecord): Promise<void> {
    await audit.appendAudit(this.db, record);
  }

  async listAudit(query: AuditQuery): Promise<StoredAuditRecord[]> {
    return audit.listAudit(this.db, query);
  }

  async pruneAudit(beforeMs: number, limit: number): Promise<number> {
    return audit.pruneAudit(this.db, beforeMs, limit);
  }

  async syncReservations(reservations: ReadonlyMap<string, string>, atMs: number): Promise<ReservationChange[]> {
    return audit.syncReservations(this.db, reservations, atMs);
  }

  async countSessions(): Promise<number> {
    const [row] = await this.db.read((conn) => run<{ n: string | number }>(conn, SQL.countSessions));
    return Number(row?.n ?? 0);
  }

  // --- RegistryStore ---------------------------------------------------------------------------

  async claimRegistration(registration: StoredRegistration, options: { refresh: boolean }): Promise<RegistrationClaim> {
    return registry.claimRegistration(this.db, registration, options.refresh);
  }

  async deleteRegistration(engineId: string, instanceId?: string, options: { registeredAtMs?: number } = {}): Promise<boolean> {
    return registry.deleteRegistration(this.db, engineId, instanceId, options.registeredAtMs);
  }

  async listRegistrations(): Promise<StoredRegistration[]> {
    return registry.listRegistrations(this.db);
  }

  async saveQuarantine(engineId: string, quarantine: QuarantineState, instanceId?: string): Promise<void> {
    await registry.saveQuarantine(this.db, engineId, quarantine, instanceId);
  }

  async clearQuarantine(engineId: string, instanceId?: string): Promise<boolean> {
    return registry.clearQuarantine(this.db, engineId, instanceId);
  }

  async listQuarantines(): Promise<Map<string, QuarantineState>> {
    return registry.listQuarantines(this.db);
  }

  async listInstanceQuarantines(): Promise<Map<string, Map<string, QuarantineState>>> {
    return registry.listInstanceQuarantines(this.db);
  }

  /** LISTEN on a connection of its own, reconnected when lost (registry-listener.ts). */
  watchRegistry(onChange: (change: RegistryChange) => void, options?: RegistryWatchOptions): RegistryWatch {
    const listener: RegistryListener = new RegistryListener(this.parsed, onChange, options, () => this.watches.delete(listener));
    this.watches.add(listener);
    return listener;
  }

  // --- StoreCopy -------------------------------------------------------------------------------

  countRows(): Promise<StoreRowCounts> {
    return copy.countRows(this.db);
  }

  listSessionIds(afterId: string, limit: number): Promise<string[]> {
    return copy.listSessionIds(this.db, afterId, limit);
  }

  readRawSession(sessionId: string): Promise<RawSession | undefined> {
    return copy.readRawSession(this.db, sessionId);
  }

  readRawEntries(sessionId: string, afterSeq: number, limit: number): Promise<RawEntry[]> {
    return copy.readRawEntries(this.db, sessionId, afterSeq, limit);
  }

  readRawRevisions(sessionId: string, after: { entryId: string; revision: number } | null, limit: number): Promise<RawRevision[]> {
    return copy.readRawRevisions(this.db, sessionId, after, limit);
  }

  readRawIdempotencyKeys(sessionId: string, afterKey: string, limit: number): Promise<RawIdempotencyKey[]> {
    return copy.readRawIdempotencyKeys(this.db, sessionId, afterKey, limit);
  }

  readRawRegistry(): Promise<RawRegistry> {
    return copy.readRawRegistry(this.db);
  }

  beginRawWrite(): Promise<RawWriter> {
    return copy.beginRawWrite(this.db);
  }

  /** Closes the registry watches, then ends the pool: waits for checked-out connections to come back, then closes them all. */
  async close(): Promise<void> {
    await Promise.all([...this.watches].map((w) => w.close()));
    await this.db.end();
  }
}
