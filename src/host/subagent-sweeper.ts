import type { Logger } from "pino";
import { SubagentEndReason, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { Router } from "../registry/router.js";
import type { ExpiredSubagent, TranscriptStore } from "../store/types.js";
import { PeriodicTask } from "./periodic-task.js";

export interface SweepSettings {
  /** How often expired children are looked for (`subagents.sweep_interval`). */
  intervalMs: number;
  /** Children claimed per store call (the next call follows at once while a batch comes back full). */
  batch?: number;
}

const DEFAULT_BATCH = 100;
/** Engine calls in flight at once: well below the default bulkhead, so a sweep never falls back for want of room. */
const CONCURRENT_NOTIFICATIONS = 8;

/**
 * The subagent TTL (PrepareSubagentSpawn's `ttl_ms`): every `subagents.sweep_interval` the store
 * hands over the children whose time has passed and that have not ended (claimExpiredSubagents —
 * atomic across replicas: each child is claimed by exactly one replica, once), and the engine that
 * serves each child hears OnSubagentEnded with reason SUBAGENT_END_REASON_SWEPT, through the router
 * like any engine call (its `subagent` deadline, fallback to `legacy` — which has nothing to do —
 * when the engine is quarantined or fails).
 *
 * A swept child is kept: its transcript stays readable (and writable) as before, and it is marked
 * ended (reason SWEPT), so it is never swept again and a later EndSubagent does not tell the engine
 * a second time (with DELETED it still deletes the transcript). The claim comes before the call:
 * an engine that cannot be reached then misses the SWEPT (it is logged) rather than hearing it
 * twice.
 */
export class SubagentSweeper {
  private readonly task: PeriodicTask;

  constructor(
    private readonly store: TranscriptStore,
    private readonly router: Router,
    private readonly settings: SweepSettings,
    private readonly log: Logger,
  ) {
    this.task = new PeriodicTask(
      () => this.sweep(),
      settings.intervalMs,
      (err) => log.warn({ err: (err as Error).message }, "subagent sweep failed; trying again at the next interval"),
    );
  }

  start(): void {
    this.task.start();
  }

  /** Stops sweeping; engine calls of a sweep in progress are cancelled. */
  stop(): Promise<void> {
    return this.task.stop();
  }

  /** One sweep: claims every child whose TTL has passed and tells its engine. Resolves with how many. */
  async sweep(nowMs = Date.now()): Promise<number> {
    const batch = this.settings.batch ?? DEFAULT_BATCH;
    let swept = 0;
    for (;;) {
      if (this.task.signal.aborted) return swept;
      const claimed = await this.store.claimExpiredSubagents(nowMs, batch);
      swept += claimed.length;
      for (let i = 0; i < claimed.length; i += CONCURRENT_NOTIFICATIONS) {
        await Promise.all(claimed.slice(i, i + CONCURRENT_NOTIFICATIONS).map((c) => this.notify(c, nowMs)));
      }
      if (claimed.length < batch) return swept;
    }
  }

  private async notify(child: ExpiredSubagent, nowMs: number): Promise<void> {
    const ref: SessionRef = { sessionId: child.sessionId, sessionKey: child.sessionKey, agentId: child.agentId };
    const fields = { sessionId: child.sessionId, parentSessionId: child.parentSessionId, expiresAtMs: child.expiresAtMs, lateMs: nowMs - child.expiresAtMs };
    try {
      const selection = this.router.select(ref);
      const routed = await this.router.call(selection, "subagent", { deadlineMs: Number.POSITIVE_INFINITY, signal: this.task.signal }, async (engine, ctx) => {
        if (!engine.onSubagentEnded || !engine.info().capabilities?.subagents) return {};
        return engine.onSubagentEnded({ child: ref, reason: SubagentEndReason.SUBAGENT_END_REASON_SWEPT }, ctx);
      });
      this.log.info({ ...fields, engineId: routed.engineId, fallbackReason: routed.fallbackReason || undefined }, "subagent swept: its ttl_ms passed");
    } catch (err) {
      this.log.warn({ ...fields, err: (err as Error).message }, "subagent swept (ttl_ms passed), but its engine could not be told");
    }
  }
}
