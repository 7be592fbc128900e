import { ForgetReason } from "../contract/gen/contextd/v1/engine.js";
import type { SessionDeletion, TranscriptStore } from "../store/types.js";
import { NO_OBSERVER, type HostObserver } from "./host-observer.js";

/** Why sessions are deleted: the `reason` label of `contextd_sessions_deleted_total`. */
export type DeletionCause = "deleted" | "subagent" | "retention_idle" | "retention_age";

const FORGET_REASON: Record<DeletionCause, ForgetReason> = {
  deleted: ForgetReason.FORGET_REASON_DELETED,
  // EndSubagent DELETED and a rolled-back spawn delete the child itself.
  subagent: ForgetReason.FORGET_REASON_DELETED,
  retention_idle: ForgetReason.FORGET_REASON_RETENTION_IDLE,
  retention_age: ForgetReason.FORGET_REASON_RETENTION_AGE,
};

/**
 * Every deletion of a session goes through here — SessionService.DeleteSession, EndSubagent
 * DELETED, a rolled-back spawn, the retention sweep — so that each one records, in the delete's
 * own transaction, a ForgetSession for every engine that served a deleted session
 * (TranscriptStore.deleteSessionTree), is counted by cause, and wakes the delivery loop
 * (forget-delivery.ts), which tells the engines.
 */
export class SessionDeletions {
  /** Set by the wiring: the delivery loop, told that deliveries were recorded. */
  onRecorded: () => void = () => {};

  constructor(
    private readonly store: TranscriptStore,
    private readonly observer: HostObserver = NO_OBSERVER,
  ) {}

  /**
   * Deletes the session (and its subagents unless `keepSubagents`); undefined when it did not exist
   * or — with `expectUpdatedAtMs` — changed meanwhile.
   */
  async delete(
    sessionId: string,
    cause: DeletionCause,
    options: { keepSubagents?: boolean; expectUpdatedAtMs?: number } = {},
  ): Promise<SessionDeletion | undefined> {
    const deleted = await this.store.deleteSessionTree(sessionId, { reason: FORGET_REASON[cause], atMs: Date.now(), ...options });
    if (!deleted) return undefined;
    this.observer.sessionsDeleted?.(cause, deleted.sessions.length);
    if (deleted.deliveries > 0) this.onRecorded();
    return deleted;
  }
}
