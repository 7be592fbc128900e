import type { CompactionEntry, Message, TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { DeletionStore } from "./deletions.js";
import type { AgentUsage, AuditQuery, AuditRecord, ReservationChange, StoredAuditRecord } from "./audit-records.js";
import type { SearchTerms } from "./search-text.js";

/**
 * The transcript store. Async so that the PostgreSQL implementation satisfies the same interface as
 * the embedded SQLite one (which answers synchronously underneath).
 *
 * Invariants every implementation keeps:
 * - Entries are append-only. A session's `seq` starts at 1 and increases by one per entry.
 * - `appendMessages` is all-or-nothing and durable (fsync'd) before its promise resolves.
 * - The active view is derived from the latest compaction entry: its summary, then the message
 *   entries from its `first_kept_entry_id` on (or, when that is empty, the entries after it), less
 *   the entries marked `hidden` (abandoned branches of an imported file, messages excluded from
 *   context). New entries follow the session's leaf (its last entry, or an imported file's leaf).
 * - Pinned system messages (docs/pinned-messages.md): every non-hidden ROLE_SYSTEM message entry
 *   from before the cut (the view's first kept seq) is part of the active view too, in transcript
 *   order, ahead of the summary. No compaction summarizes a system message away: the view is
 *   [pinned system messages] + [summary] + [kept entries, system messages among them in place].
 *   Their tokens count in ActiveView.tokens and ActiveTotals (under ROLE_SYSTEM). The transcript
 *   itself (readEntries) is unchanged. A partial index (role = system) keeps reading them cheap
 *   however long the history before the cut is.
 * - `commitCompaction` commits only when no other compaction was committed since the caller read
 *   the view (optimistic concurrency on `latestCompactionId`).
 */
export interface TranscriptStore extends DeletionStore {
  readonly kind: "sqlite" | "postgres";

  /**
   * Appends messages, creating the session when it does not exist yet. With `maxEntries`, throws
   * ResourceExhaustedError (writing nothing) when the session would grow past it.
   */
  appendMessages(sessionId: string, messages: NewMessage[], create: SessionLabels, maxEntries?: number): Promise<TranscriptEntry[]>;
  /**
   * appendMessages under an idempotency key, checked and recorded in the same transaction: the first
   * call with a key appends and records the entry ids; a later call with the same key and the same
   * `requestHash` writes nothing and answers the recorded ids (`replayed`); the same key with
   * another hash throws AlreadyExistsError naming the key. Keys are scoped to the session and
   * live as long as it does.
   */
  appendIdempotent(sessionId: string, messages: NewMessage[], create: SessionLabels, key: IdempotencyKey, maxEntries?: number): Promise<IdempotentAppend>;
  /**
   * An append of messages that carry keys (NewMessage.key), with or without an idempotency key: in
   * one transaction, the messages whose key the session already holds are not stored (their slots
   * answer the holding entry's id and token count, their indexes are `held`), the others are
   * appended as appendMessages does — so a keyed message is stored once, whichever request brings
   * it first. With `key`, as appendIdempotent (a replay writes and holds nothing).
   */
  appendKeyed(sessionId: string, messages: NewMessage[], create: SessionLabels, key?: IdempotencyKey, maxEntries?: number): Promise<KeyedAppend>;
  /**
   * Creates a session from a runtime's transcript file, in one transaction: entries keep their ids,
   * parent ids, timestamps and `hidden` flags; the active view is set as `transcript` says. Throws
   * AlreadyExistsError when the session exists, InvalidArgumentError for an inconsistent plan.
   */
  importSession(sessionId: string, labels: SessionLabels, transcript: ImportedTranscript): Promise<SessionRecord>;
  /**
   * Creates a session that must not exist yet, with initial entries (subagent forks, imports), all
   * in one transaction. Throws AlreadyExistsError when it exists. `expiresAtMs` (> 0) gives it a
   * TTL: claimExpiredSubagents returns it once that time has passed (unless it ended first).
   */
  createSession(sessionId: string, labels: SessionLabels, seed: SeedEntry[], options?: { expiresAtMs?: number }): Promise<SessionRecord>;
  getSession(sessionId: string): Promise<SessionRecord | undefined>;
  /**
   * Sessions ordered by most recent activity first; `cursor` is the previous page's last
   * `updatedAtMs:sessionId`. With `agents`, only sessions of those agents, filtered in the query —
   * so a page and its cursor never hold a session outside them (a runtime's listing).
   */
  listSessions(limit: number, cursor?: string, agents?: AgentScope): Promise<{ sessions: SessionRecord[]; nextCursor: string }>;
  /** Entries with seq > afterSeq, oldest first, at most `limit`. */
  readEntries(sessionId: string, afterSeq: number, limit: number): Promise<TranscriptEntry[]>;
  /** Token totals of the active view by role, without reading its messages; undefined when the session does not exist. */
  readActiveTotals(sessionId: string): Promise<ActiveTotals | undefined>;
  /**
   * The active view; undefined when the session does not exist or is not one of `agents`' — the
   * entries of such a session are never read, so a refusal costs what a missing id costs (a caller
   * must not learn, from the time it took, how long another agent's session is).
   */
  readActiveView(sessionId: string, agents?: AgentScope): Promise<ActiveView | undefined>;
  /**
   * Appends a compaction entry when `expectedLatestCompactionId` (empty string for "none yet") is
   * still the session's latest compaction; otherwise throws ConflictError and writes nothing.
   * Throws InvalidArgumentError when `first_kept_entry_id` is not a kept message entry of the
   * active view (a pinned system message from before the cut cannot start the kept part: it heads
   * the view whatever the cut).
   * `compactedThroughSeq` is the last seq of the view that was compacted: with an empty
   * `first_kept_entry_id`, entries appended after it (while the compaction ran) stay active.
   */
  commitCompaction(
    sessionId: string,
    compaction: CompactionEntry,
    expectedLatestCompactionId: string,
    summaryTokens: number,
    compactedThroughSeq?: number,
  ): Promise<TranscriptEntry>;
  /**
   * Deletes a session and its entries, keeping its subagent children, and records its forget
   * deliveries (reason DELETED); deleteSessionTree (deletions.ts) says how. False when it did not exist.
   */
  deleteSession(sessionId: string): Promise<boolean>;
  /**
   * Replaces the content of message entries (HostService.RewriteTranscriptEntries), in one
   * transaction. The previous revision of each entry is kept (readEntryRevisions); the entry's
   * `revision` goes up by one. Throws InvalidArgumentError when an id is not a message entry of the
   * session (and writes nothing).
   */
  rewriteEntries(sessionId: string, rewrites: EntryRewriteInput[], reason: string): Promise<RewriteOutcome>;
  /** Earlier revisions of one entry, oldest first. */
  readEntryRevisions(sessionId: string, entryId: string): Promise<EntryRevision[]>;
  /**
   * Records that a subagent session ended (EndSubagent), once: `{ ended: true }` when this call
   * ended it, otherwise how it had ended before (by an earlier EndSubagent, or the TTL sweep). The
   * session itself is kept. Throws NotFoundError for an unknown session.
   */
  endSubagentSession(sessionId: string, reason: number, atMs: number): Promise<SubagentEnd>;
  /**
   * Takes back the end that endSubagentSession recorded at `atMs` (the engine could not be told),
   * so that a retry may end it again; false when the session's end is another one (or none).
   */
  reopenSubagentSession(sessionId: string, atMs: number): Promise<boolean>;
  /**
   * Claims subagent sessions whose TTL passed (expiresAtMs <= nowMs) and that have not ended:
   * marks each ended at `nowMs` with reason SUBAGENT_END_REASON_SWEPT and returns it — at most
   * `limit`, earliest expiry first. Atomic across connections and processes: of several stores
   * claiming at once (replicas), each expired session is returned by exactly one, exactly once.
   */
  claimExpiredSubagents(nowMs: number, limit: number): Promise<ExpiredSubagent[]>;
  /** The TTL and end of a session (zeros when it has neither); undefined when it does not exist. */
  readSubagentState(sessionId: string): Promise<SubagentState | undefined>;
  /**
   * History search (proto/contextd/v1/search.proto, store/search-hits.ts): the entries of the
   * session — or, with `agentId`, of every session of that agent — whose text holds every term,
   * in NEWEST order after `after`, at most `limit` (RELEVANCE: the RELEVANCE_CANDIDATES newest,
   * ranked in search-hits.ts). Compacted, hidden and rewritten entries are searched as they stand.
   */
  searchCandidates(search: StoreSearch): Promise<SearchCandidate[]>;
  /** One entry by id; undefined when the session has no such entry (NotFoundError when the session does not exist). */
  readEntryById(sessionId: string, entryId: string): Promise<TranscriptEntry | undefined>;
  /** The latest compaction entry before `beforeSeq`; undefined when there is none. */
  readPreviousCompaction(sessionId: string, beforeSeq: number): Promise<TranscriptEntry | undefined>;
  /** Records what the last assembly added to the system prompt (for the context overview). */
  setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void>;
  /**
   * Resolves when the store answers a trivial query (for health and readiness); a store that
   * cannot be reached throws UnavailableError.
   */
  ping(): Promise<void>;
  /** How many sessions the store holds (for the `contextd_sessions` gauge; read at most every few seconds). */
  countSessions(): Promise<number>;
  /** The sessions of `agentId` and the bytes they hold (entries and replaced revisions, as stored): what its quotas count. */
  agentUsage(agentId: string): Promise<AgentUsage>;
  /** Writes one audit record (audit-records.ts). */
  appendAudit(record: AuditRecord): Promise<void>;
  /** A page of the audit trail, newest first (AuditQuery). */
  listAudit(query: AuditQuery): Promise<StoredAuditRecord[]>;
  /** Deletes audit records older than `beforeMs`, at most `limit` of them; answers how many it deleted. */
  pruneAudit(beforeMs: number, limit: number): Promise<number>;
  /**
   * Records `reservations` ([engineId, owner], the configuration's) as the ones the store has seen,
   * and, in the same transaction, one audit record per change since the last call (by any replica)
   * made by `config` at `atMs`. Answers the changes (none when another replica recorded them first).
   */
  syncReservations(reservations: ReadonlyMap<string, string>, atMs: number): Promise<ReservationChange[]>;
  close(): Promise<void>;
}

/**
 * Which agents' sessions a listing covers: a session matches when its agent id is one of `exact` or
 * starts with one of `prefixes` (a runtime token's `agents`: `"team-*"` is the prefix "team-", `"*"`
 * the prefix ""). Both empty: no session.
 */
export interface AgentScope {
  exact: readonly string[];
  prefixes: readonly string[];
}

/** A history search as the stores run it (searchCandidates). */
export interface StoreSearch {
  /** The session searched (without `agentId`). */
  sessionId: string;
  /** Set: every session of this agent is searched (SearchScope AGENT). */
  agentId?: string;
  terms: SearchTerms;
  /** Resume after this position of NEWEST order (exclusive). */
  after?: SearchPosition;
  limit: number;
}

/** A position in NEWEST order: sessions newest-created first (then by id), entries by seq, highest first. */
export interface SearchPosition {
  createdAtMs: number;
  sessionId: string;
  seq: number;
}

/** A matching entry as a store reads it: its position and stored bytes. */
export interface SearchCandidate extends SearchPosition {
  payload: Uint8Array;
}

/** Every session (the prefix ""): listings without an agent filter. */
export const ALL_AGENTS: AgentScope = { exact: [], prefixes: [""] };

/** Whether a session of `agentId` is within `scope`. */
export function inAgentScope(scope: AgentScope, agentId: string): boolean {
  return scope.exact.includes(agentId) || scope.prefixes.some((p) => agentId.startsWith(p));
}

/** endSubagentSession's answer. */
export type SubagentEnd = { ended: true } | { ended: false; endedAtMs: number; reason: number };

/** A child session claimed by claimExpiredSubagents. */
export interface ExpiredSubagent {
  sessionId: string;
  sessionKey: string;
  agentId: string;
  parentSessionId: string;
  expiresAtMs: number;
}

export interface SubagentState {
  /** 0: no TTL. */
  expiresAtMs: number;
  /** 0: not ended. */
  endedAtMs: number;
  /** The SubagentEndReason it ended with (0 while it has not). */
  endReason: number;
}

/** Runtime labels recorded when a session is created. */
export interface SessionLabels {
  sessionKey: string;
  agentId: string;
  parentSessionId?: string;
}

export interface NewMessage {
  message: Message;
  tokenCount: number;
  /** The runtime's key for the message (AppendMessagesRequest.message_keys); only appendKeyed looks at it. */
  key?: string;
}

export interface IdempotencyKey {
  key: string;
  /** A digest of what the request asks to write (host/append-digest.ts). */
  requestHash: string;
}

export type IdempotentAppend = { replayed: false; entries: TranscriptEntry[] } | { replayed: true; entryIds: string[]; tokenCounts: number[] };

/** appendKeyed's answer. */
export type KeyedAppend =
  | {
      replayed: false;
      /** The entries this call stored, in request order (held messages left out). */
      entries: TranscriptEntry[];
      /** Per requested message: the id and token count of its entry, stored now or held before. */
      entryIds: string[];
      tokenCounts: number[];
      /** Indexes of the messages whose key the session already held. */
      held: number[];
    }
  | { replayed: true; entryIds: string[]; tokenCounts: number[] };

/** A transcript file as the store imports it (host/import-transcript.ts plans it). */
export interface ImportedTranscript {
  /** The file's header line, kept for export ("" when it had none). */
  headerJson: string;
  /**
   * Every entry in file order. Each has its id, parent id, timestamp, runtime fields and `hidden`
   * flag set; seqs are assigned in this order. Message entries carry their token count.
   */
  entries: { entry: TranscriptEntry; tokenCount: number }[];
  /** The entry new appends follow ("" for none). */
  leafEntryId: string;
  /** Index of the compaction whose summary heads the active view; null for none. */
  compactionIndex: number | null;
  /** Index of the first entry of the active view after the summary (entries.length: none). */
  activeFromIndex: number;
}

export type SeedEntry =
  | { kind: "message"; message: Message; tokenCount: number }
  /** A compaction whose first kept entry is the seed entry at index `firstKeptIndex` (or none). */
  | { kind: "compaction"; compaction: CompactionEntry; firstKeptIndex: number | null; summaryTokens: number };

export interface SessionRecord {
  sessionId: string;
  sessionKey: string;
  agentId: string;
  parentSessionId: string;
  createdAtMs: number;
  updatedAtMs: number;
  entryCount: number;
  messageCount: number;
  compactionCount: number;
  /** Tokens of every message ever appended. */
  totalTokens: number;
  lastSeq: number;
  /** Id of the compaction whose summary heads the active view; empty when none does. */
  latestCompactionId: string;
  systemAdditionTokens: number;
  /** The header line of the file the session was imported from ("" for a session begun in contextd). */
  headerJson: string;
  /** The key of the newest message entry that has one ("" when none has). */
  lastMessageKey: string;
  /** The timestamp of the newest message entry (0 without one). */
  lastMessageTimestampMs: number;
  /** Bytes the session holds: its entries' and replaced revisions' payloads, as stored. */
  storedBytes: number;
}

export interface ViewMessage {
  entryId: string;
  seq: number;
  tokenCount: number;
  message: Message;
}

export interface ActiveView {
  session: SessionRecord;
  /** The latest compaction entry, when there is one. */
  compaction?: { entry: TranscriptEntry; summaryTokens: number };
  /**
   * Message entries of the active view in transcript order; `message.id` and `message.tokenCount`
   * are set. The first `pinnedCount` are the pinned system messages from before the cut (the
   * model sees them before the summary, host/active-view.ts); the others are the kept entries.
   */
  messages: ViewMessage[];
  /** How many of `messages` are pinned system messages from before the latest compaction's cut (0 without one). */
  pinnedCount: number;
  /** Summary tokens plus every message's tokens (pinned ones included). */
  tokens: number;
}

export interface EntryRewriteInput {
  entryId: string;
  message: Message;
  tokenCount: number;
}

export interface RewriteOutcome {
  rewrittenEntries: number;
  /** Encoded bytes saved in the live transcript (old payloads minus new; may be negative → 0). */
  bytesFreed: number;
}

export interface EntryRevision {
  entry: TranscriptEntry;
  replacedAtMs: number;
  reason: string;
}

export interface ActiveTotals {
  session: SessionRecord;
  summaryTokens: number;
  /** Message tokens of the active view by Role (pinned system messages under ROLE_SYSTEM). */
  tokensByRole: Map<number, number>;
  /** Summary tokens plus every message's tokens (equals ActiveView.tokens). */
  tokens: number;
}

// Deletion that reaches every engine, and retention (deletions.ts).
export type * from "./deletions.js";

// The store-to-store copy interface (contextctl migrate-store) and its raw rows.
export type * from "./store-copy.js";
export type * from "./audit-records.js";
