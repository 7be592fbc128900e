// What the stores keep for deletion that reaches every engine (ContextEngineService.ForgetSession)
// and for retention: which engines served a session, the durable forget deliveries a delete
// records, the leases that let one replica at a time run a loop, and the retention rules' queries.

/** How a deletion is asked for (deleteSessionTree). */
export interface DeleteOptions {
  /** The ForgetReason the root session is forgotten with (its subagents get PARENT_DELETED). */
  reason: number;
  /** When the deletion happens (ms since the epoch): the deliveries' `deleted_at_ms`, their first attempt. */
  atMs: number;
  /** Keep the session's subagent children (DeleteSessionRequest.keep_subagents). */
  keepSubagents?: boolean;
  /**
   * Delete only when the session's `updated_at_ms` is still this (the retention sweep: a session
   * written to since it was found expired is kept). Otherwise nothing is deleted.
   */
  expectUpdatedAtMs?: number;
}

/** What deleteSessionTree removed, in one transaction. */
export interface SessionDeletion {
  /** The deleted sessions: the root first, then its subagent descendants. */
  sessions: { sessionId: string; sessionKey: string; agentId: string }[];
  /** ForgetSession deliveries recorded (one per deleted session and engine that served it). */
  deliveries: number;
}

/** One pending ForgetSession, as claimForgetDeliveries hands it over (leased to the caller). */
export interface ForgetDelivery {
  sessionId: string;
  engineId: string;
  sessionKey: string;
  agentId: string;
  /** ForgetReason. */
  reason: number;
  deletedAtMs: number;
  /** Attempts so far, this one included. */
  attempts: number;
}

/** How a delivery attempt ended (settleForgetDelivery). */
export type ForgetOutcome = { done: true } | { done: false; retryAtMs: number; error: string };

/**
 * One retention rule as the store queries it: the sessions of `agentId` (or, without one, of every
 * agent not in `excludeAgents`) whose expiry — the earlier of `updated_at_ms + maxIdleMs` and
 * `created_at_ms + maxAgeMs`, each only when set — is at or before a cutoff.
 */
export interface RetentionRule {
  agentId?: string;
  excludeAgents: readonly string[];
  maxIdleMs?: number;
  maxAgeMs?: number;
}

/** A session a retention rule expires (listExpiringSessions). */
export interface ExpiringSession {
  sessionId: string;
  sessionKey: string;
  agentId: string;
  parentSessionId: string;
  createdAtMs: number;
  updatedAtMs: number;
  expiresAtMs: number;
  /** Which limit expires it first ("idle" on a tie). */
  cause: "idle" | "age";
}

/** The store side of deletion and retention; TranscriptStore extends it. */
export interface DeletionStore {
  /**
   * Records that `engineId` served (was called for) the session — idempotent. Deleting the session
   * sends ForgetSession to every engine recorded here.
   */
  recordSessionEngine(sessionId: string, engineId: string, atMs: number): Promise<void>;
  /** The engines recorded for a session, by id. */
  readSessionEngines(sessionId: string): Promise<string[]>;
  /**
   * Deletes a session and — unless `keepSubagents` — its subagent descendants, with their entries,
   * revisions and keys, and records in the same transaction one forget delivery per deleted session
   * and engine that served it. undefined when the session does not exist (or, with
   * `expectUpdatedAtMs`, changed): nothing is written then.
   */
  deleteSessionTree(sessionId: string, options: DeleteOptions): Promise<SessionDeletion | undefined>;
  /**
   * Leases up to `limit` deliveries that are due (next attempt at or before `nowMs`) and not leased
   * by anyone else (or whose lease ran out) to `owner` until `nowMs + leaseMs`, counting the
   * attempt. Atomic across processes: of replicas claiming at once, each delivery goes to one.
   */
  claimForgetDeliveries(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<ForgetDelivery[]>;
  /**
   * Ends an attempt: done removes the delivery, otherwise it is due again at `retryAtMs`. Only while
   * `owner` holds its lease (and it is the same deletion): false when the lease had passed to
   * another replica, which then settles it.
   */
  settleForgetDelivery(delivery: ForgetDelivery, owner: string, outcome: ForgetOutcome): Promise<boolean>;
  /** Makes an engine's pending deliveries due now (the engine is back: registered or released). */
  wakeForgetDeliveries(engineId: string, nowMs: number): Promise<number>;
  /** Pending deliveries (for the `contextd_forget_deliveries_pending` gauge). */
  countForgetDeliveries(): Promise<number>;
  /**
   * Takes or renews the named lease for `owner` until `nowMs + ttlMs` when it is free, expired or
   * already `owner`'s; false when another owner holds it. One replica at a time runs the loop
   * that holds it (the retention sweep).
   */
  tryLease(name: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean>;
  /** Sessions `rule` expires by `cutoffMs`, soonest first, at most `limit`. */
  listExpiringSessions(rule: RetentionRule, cutoffMs: number, limit: number): Promise<ExpiringSession[]>;
}

/** The expiry a rule gives a session (Infinity: never). */
export function expiryOf(rule: Pick<RetentionRule, "maxIdleMs" | "maxAgeMs">, s: { createdAtMs: number; updatedAtMs: number }): number {
  const idle = rule.maxIdleMs !== undefined ? s.updatedAtMs + rule.maxIdleMs : Number.POSITIVE_INFINITY;
  const age = rule.maxAgeMs !== undefined ? s.createdAtMs + rule.maxAgeMs : Number.POSITIVE_INFINITY;
  return Math.min(idle, age);
}

/** A session row as the retention queries read it. */
export interface ExpiringRow {
  session_id: string;
  session_key: string;
  agent_id: string;
  parent_session_id: string;
  created_at_ms: number | string;
  updated_at_ms: number | string;
}

/** A row of a retention query, with its expiry and what causes it. */
export function toExpiring(rule: RetentionRule, r: ExpiringRow): ExpiringSession {
  const createdAtMs = Number(r.created_at_ms);
  const updatedAtMs = Number(r.updated_at_ms);
  const expiresAtMs = expiryOf(rule, { createdAtMs, updatedAtMs });
  const idle = rule.maxIdleMs !== undefined ? updatedAtMs + rule.maxIdleMs : Number.POSITIVE_INFINITY;
  return {
    sessionId: r.session_id,
    sessionKey: r.session_key,
    agentId: r.agent_id,
    parentSessionId: r.parent_session_id,
    createdAtMs,
    updatedAtMs,
    expiresAtMs,
    cause: idle <= expiresAtMs ? "idle" : "age",
  };
}
