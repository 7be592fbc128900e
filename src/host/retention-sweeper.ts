import type { Logger } from "pino";
import type { TranscriptStore } from "../store/types.js";
import type { RetentionPolicy } from "./retention.js";
import type { SessionDeletions } from "./session-deletions.js";
import { PeriodicTask } from "./periodic-task.js";

/** The lease the sweeping replica holds (TranscriptStore.tryLease). */
export const RETENTION_LEASE = "retention-sweep";
const DEFAULT_BATCH = 100;

/**
 * The retention sweep: every `retention.sweep_interval`, one replica — the one holding the
 * `retention-sweep` lease, taken or renewed at each sweep for three intervals, so another replica
 * takes over within three intervals of the holder's death — deletes the sessions retention expires
 * (retention.ts), through the deletion path every deletion takes (session-deletions.ts): their
 * subagents with them, and a ForgetSession recorded for every engine that served them. A session
 * written to after it was found expired is kept (the delete checks `updated_at_ms`).
 */
export class RetentionSweeper {
  private readonly task: PeriodicTask;

  constructor(
    private readonly store: TranscriptStore,
    private readonly policy: RetentionPolicy,
    private readonly deletions: SessionDeletions,
    private readonly owner: string,
    private readonly log: Logger,
    private readonly batch = DEFAULT_BATCH,
  ) {
    this.task = new PeriodicTask(
      () => this.sweep(),
      policy.settings.sweepIntervalMs,
      (err) => log.warn({ err: (err as Error).message }, "retention sweep failed; trying again at the next interval"),
    );
  }

  start(): void {
    if (this.policy.active) this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** One sweep, when this replica holds the lease: resolves with how many sessions it deleted (-1: another replica sweeps). */
  async sweep(nowMs = Date.now()): Promise<number> {
    const interval = this.policy.settings.sweepIntervalMs;
    if (!(await this.store.tryLease(RETENTION_LEASE, this.owner, nowMs, 3 * interval))) return -1;
    let deleted = 0;
    for (const rule of this.policy.rules()) {
      for (;;) {
        if (this.task.signal.aborted) return deleted;
        const expired = await this.store.listExpiringSessions(rule, nowMs, this.batch);
        let progress = 0;
        for (const s of expired) {
          const gone = await this.deletions.delete(s.sessionId, s.cause === "idle" ? "retention_idle" : "retention_age", {
            expectUpdatedAtMs: s.updatedAtMs,
          });
          if (!gone) continue;
          progress++;
          deleted += gone.sessions.length;
          this.log.info(
            { sessionId: s.sessionId, agentId: s.agentId, cause: s.cause, expiredAtMs: s.expiresAtMs, withSubagents: gone.sessions.length - 1 },
            "retention deleted a session",
          );
        }
        // A full batch that deleted something may have more behind it; one that deleted nothing
        // (every session changed meanwhile) is left for the next sweep.
        if (expired.length < this.batch || progress === 0) break;
      }
    }
    return deleted;
  }
}
