import type { CompactionEntry, Message, TranscriptEntry } from "../contract/gen/contextd/v1/types.js";

/**
 * The transcript store. Async so that the PostgreSQL implementation satisfies the same interface as
 * the embedded SQLite one (which answers synchronously underneath).
 *
 * Invariants every implementation keeps:
 * - Entries are append-only. A session's `seq` starts at 1 and increases by one per entry.
 * - `appendMessages` is all-or-nothing and durable (fsync'd) before its promise resolves.
 * - The active view is derived from the latest compaction entry: its summary, then the message
 *   entries from its `first_kept_entry_id` on (or, when that is empty, the entries after it).
 * - `commitCompaction` commits only when no other compaction was committed since the caller read
 *   the view (optimistic concurrency on `latestCompactionId`).
 */
export interface TranscriptStore {
  readonly kind: "sqlite" | "postgres";

  /**
   * Appends messages, creating the session when it does not exist yet. With `maxEntries`, throws
   * ResourceExhaustedError (writing nothing) when the session would grow past it.
   */
  appendMessages(sessionId: string, messages: NewMessage[], create: SessionLabels, maxEntries?: number): Promise<TranscriptEntry[]>;
  /**
   * Creates a session that must not exist yet, with initial entries (subagent forks, imports), all
   * in one transaction. Throws AlreadyExistsError when it exists.
   */
  createSession(sessionId: string, labels: SessionLabels, seed: SeedEntry[]): Promise<SessionRecord>;
  getSession(sessionId: string): Promise<SessionRecord | undefined>;
  /** Sessions ordered by most recent activity first; `cursor` is the previous page's last `updatedAtMs:sessionId`. */
  listSessions(limit: number, cursor?: string): Promise<{ sessions: SessionRecord[]; nextCursor: string }>;
  /** Entries with seq > afterSeq, oldest first, at most `limit`. */
  readEntries(sessionId: string, afterSeq: number, limit: number): Promise<TranscriptEntry[]>;
  /** Token totals of the active view by role, without reading its messages; undefined when the session does not exist. */
  readActiveTotals(sessionId: string): Promise<ActiveTotals | undefined>;
  /** The active view; undefined when the session does not exist. */
  readActiveView(sessionId: string): Promise<ActiveView | undefined>;
  /**
   * Appends a compaction entry when `expectedLatestCompactionId` (empty string for "none yet") is
   * still the session's latest compaction; otherwise throws ConflictError and writes nothing.
   * Throws InvalidArgumentError when `first_kept_entry_id` is not a message entry of the active view.
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
  /** Deletes a session and its entries. False when it did not exist. */
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
  /** Records what the last assembly added to the system prompt (for the context overview). */
  setSystemAdditionTokens(sessionId: string, tokens: number): Promise<void>;
  close(): Promise<void>;
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
  /** Id of the latest compaction entry; empty when never compacted. */
  latestCompactionId: string;
  systemAdditionTokens: number;
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
  /** Message entries of the active view, oldest first; `message.id` and `message.tokenCount` are set. */
  messages: ViewMessage[];
  /** Summary tokens plus every message's tokens. */
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
  /** Message tokens of the active view by Role. */
  tokensByRole: Map<number, number>;
  /** Summary tokens plus every message's tokens (equals ActiveView.tokens). */
  tokens: number;
}
