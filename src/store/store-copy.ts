/**
 * Raw access to what a store keeps, row by row, so that a store can be copied into another one
 * unchanged: entry ids, seqs, payloads, revisions, idempotency keys, headers and the derived
 * active-view pointers, and the registry's four tables (engines, their instances, engine-wide and
 * per-instance quarantine records). Reads are paged so that a session of a million entries never
 * has to be in memory at once. The source should not be written to while it is copied (stop
 * contextd first).
 */
export interface StoreCopy {
  /** How many rows each table holds (a copy refuses a target that holds anything). */
  countRows(): Promise<StoreRowCounts>;
  /** Session ids in ascending order (by code point), after `afterId` ("" for the first page), at most `limit`. */
  listSessionIds(afterId: string, limit: number): Promise<string[]>;
  /** The session's row; undefined when it does not exist. */
  readRawSession(sessionId: string): Promise<RawSession | undefined>;
  /** Entries with seq > afterSeq, oldest first, at most `limit`. */
  readRawEntries(sessionId: string, afterSeq: number, limit: number): Promise<RawEntry[]>;
  /** Replaced revisions ordered by (entry id, revision), after `after` (null for the first page), at most `limit`. */
  readRawRevisions(sessionId: string, after: { entryId: string; revision: number } | null, limit: number): Promise<RawRevision[]>;
  /** Idempotency keys ordered by key, after `afterKey` ("" for the first page), at most `limit`. */
  readRawIdempotencyKeys(sessionId: string, afterKey: string, limit: number): Promise<RawIdempotencyKey[]>;
  /** Every row of the registry's tables, each table in primary-key order (it is small: no paging). */
  readRawRegistry(): Promise<RawRegistry>;
  /**
   * Opens one transaction that writes raw rows into this store: nothing is visible to other
   * connections until `commit`, and `rollback` (or a failed write) leaves the store as it was.
   * Throws FailedPreconditionError when the store already holds a row in any table StoreRowCounts
   * counts (checked inside the transaction). No other call may use the store while it is open.
   */
  beginRawWrite(): Promise<RawWriter>;
}

/** One transaction of raw writes (StoreCopy.beginRawWrite). Rows are written exactly as given. */
export interface RawWriter {
  /** A session row; write it before its entries, revisions and keys. */
  writeSession(session: RawSession): Promise<void>;
  writeEntries(sessionId: string, entries: RawEntry[]): Promise<void>;
  writeRevisions(sessionId: string, revisions: RawRevision[]): Promise<void>;
  writeIdempotencyKeys(sessionId: string, keys: RawIdempotencyKey[]): Promise<void>;
  /** Every row of every registry table, written as given (instance rows whose engine row is absent too). */
  writeRegistry(registry: RawRegistry): Promise<void>;
  commit(): Promise<void>;
  /** Discards everything written; a no-op after commit or a previous rollback. */
  rollback(): Promise<void>;
}

export interface StoreRowCounts {
  sessions: number;
  entries: number;
  entryRevisions: number;
  idempotencyKeys: number;
  /** engine_registrations: one per engine id. */
  registrations: number;
  /** engine_instances: one per instance of an engine. */
  instances: number;
  /** engine_quarantines: engine-wide records (an operator's isolation of an engine, or an older replica's record). */
  quarantines: number;
  /** engine_instance_quarantines: one instance's record (automatic, or an operator's isolation of it). */
  instanceQuarantines: number;
}

/** The counts of an empty store. */
export const NO_ROWS: Readonly<StoreRowCounts> = {
  sessions: 0,
  entries: 0,
  entryRevisions: 0,
  idempotencyKeys: 0,
  registrations: 0,
  instances: 0,
  quarantines: 0,
  instanceQuarantines: 0,
};

/** A session row with every column, the derived active-view pointers included. */
export interface RawSession {
  sessionId: string;
  sessionKey: string;
  agentId: string;
  parentSessionId: string;
  createdAtMs: number;
  updatedAtMs: number;
  entryCount: number;
  messageCount: number;
  compactionCount: number;
  totalTokens: number;
  lastSeq: number;
  lastEntryId: string;
  latestCompactionId: string;
  latestCompactionSeq: number;
  activeFromSeq: number;
  activeSummaryTokens: number;
  systemAdditionTokens: number;
  headerJson: string;
  /** Subagent TTL and end (SubagentState; zeros when none). */
  expiresAtMs: number;
  endedAtMs: number;
  endReason: number;
  /** The newest keyed message's key and the newest message's timestamp (SessionRecord). */
  lastMessageKey: string;
  lastMessageTimestampMs: number;
}

export interface RawEntry {
  seq: number;
  id: string;
  parentId: string;
  kind: "message" | "compaction" | "custom";
  /** Role of a message entry; null for compaction and custom entries. */
  role: number | null;
  tokenCount: number;
  timestampMs: number;
  hidden: boolean;
  /** AppendMessagesRequest.message_keys of a message entry; null for none. */
  messageKey: string | null;
  /** TranscriptEntry.encode(entry).finish(). */
  payload: Uint8Array;
}

export interface RawRevision {
  entryId: string;
  revision: number;
  tokenCount: number;
  replacedAtMs: number;
  reason: string;
  payload: Uint8Array;
}

export interface RawIdempotencyKey {
  key: string;
  requestHash: string;
  /** JSON arrays, as recorded by the append the key answered. */
  entryIdsJson: string;
  tokenCountsJson: string;
  createdAtMs: number;
}

/** The registry's rows (docs/registry.md, "Stored and shared"). */
export interface RawRegistry {
  registrations: RawRegistration[];
  instances: RawInstance[];
  quarantines: RawQuarantine[];
  instanceQuarantines: RawInstanceQuarantine[];
}

/** A row of engine_registrations: the id's owner and its most recently registered instance. */
export interface RawRegistration {
  engineId: string;
  owner: string;
  endpoint: string;
  /** EngineInfo.encode(info).finish(). */
  info: Uint8Array;
  protocolVersion: number;
  registeredAtMs: number;
}

/** A row of engine_instances. */
export interface RawInstance {
  engineId: string;
  instanceId: string;
  endpoint: string;
  /** Locality.encode(locality).finish(); empty for none. */
  locality: Uint8Array;
  /** EngineInfo.encode(info).finish(). */
  info: Uint8Array;
  protocolVersion: number;
  registeredAtMs: number;
}

/** A row of engine_quarantines (the engine as a whole). */
export interface RawQuarantine {
  engineId: string;
  /** QuarantineState.encode(state).finish(). */
  payload: Uint8Array;
  updatedAtMs: number;
}

/** A row of engine_instance_quarantines (one instance). */
export interface RawInstanceQuarantine extends RawQuarantine {
  instanceId: string;
}
