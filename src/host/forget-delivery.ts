import type { Logger } from "pino";
import type { EngineRegistry } from "../registry/engine-registry.js";
import type { ForgetDelivery, TranscriptStore } from "../store/types.js";
import { PeriodicTask } from "./periodic-task.js";
import { NO_OBSERVER, type HostObserver } from "./host-observer.js";

export interface ForgetDeliverySettings {
  /** How often the store is asked for due deliveries (`forget.poll_interval`); a deletion here wakes the loop at once. */
  pollIntervalMs: number;
  /** The first retry's delay (`forget.backoff.initial`); doubled per failed attempt, with jitter. */
  backoffInitialMs: number;
  /** The longest delay between two attempts (`forget.backoff.max`). */
  backoffMaxMs: number;
  /** An engine's ForgetSession deadline (`engines.timeouts.forget`, per engine in `engines.overrides`). */
  timeoutMs: (engineId: string) => number;
  /** This replica's name in the deliveries' leases. */
  owner: string;
  /** Deliveries claimed per store call. */
  batch?: number;
}

const DEFAULT_BATCH = 32;
/** Engine calls in flight at once. */
const CONCURRENT_DELIVERIES = 8;
/** A lease outlasts the engine's deadline by this much: a replica that still holds a call in flight never loses its lease to another. */
const LEASE_MARGIN_MS = 10_000;

/**
 * Delivers the ForgetSession calls that deletions recorded (session-deletions.ts) until each engine
 * acknowledges. Every `forget.poll_interval`, and at once after a deletion on this replica, it claims
 * the due deliveries under a row lease (TranscriptStore.claimForgetDeliveries: of several replicas
 * claiming at once, each row goes to one) and calls the engine directly — not through the router:
 * the engine that served the session, whichever one the slot selects now, and never `legacy` in its
 * place.
 *
 * - Acknowledged (OK): the delivery is removed (counted `delivered`).
 * - The engine is registered but does not declare `capabilities.forget`: removed, counted
 *   `unsupported` and logged (it is never told; docs/operations.md says what that leaves).
 * - Not registered here, every instance quarantined, or any error: due again after a backoff
 *   (`forget.backoff`, doubling, with jitter), counted `failed`; an engine that registers again or is
 *   released is woken at once (wake). A failed ForgetSession never quarantines the engine.
 *
 * A lease outlives the engine's deadline, so a replica whose call is still in flight keeps it; a
 * replica that dies holding leases leaves them to expire, and another delivers. Delivery is at least
 * once (an engine that purged but whose answer was lost hears it again), acknowledged once.
 */
export class ForgetDeliveries {
  private readonly task: PeriodicTask;

  constructor(
    private readonly store: TranscriptStore,
    private readonly registry: EngineRegistry,
    private readonly settings: ForgetDeliverySettings,
    private readonly log: Logger,
    private readonly observer: HostObserver = NO_OBSERVER,
  ) {
    this.task = new PeriodicTask(
      () => this.deliverDue(),
      settings.pollIntervalMs,
      (err) => log.warn({ err: (err as Error).message }, "forget delivery failed; trying again at the next poll"),
    );
  }

  start(): void {
    this.task.start(0);
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** Deliveries were recorded, or an engine came back: deliver now rather than at the next poll. */
  kick(): void {
    this.task.kick();
  }

  /** An engine registered or was released: its pending deliveries are due now. */
  async wake(engineId: string): Promise<void> {
    const woken = await this.store.wakeForgetDeliveries(engineId, Date.now()).catch(() => 0);
    if (woken > 0) this.kick();
  }

  /** Claims and delivers what is due, batch after batch; resolves with how many attempts were made. */
  async deliverDue(): Promise<number> {
    const batch = this.settings.batch ?? DEFAULT_BATCH;
    let attempts = 0;
    for (;;) {
      if (this.task.signal.aborted) return attempts;
      const now = Date.now();
      const maxTimeout = Math.max(...this.registry.list().map((r) => this.settings.timeoutMs(r.id)), this.settings.timeoutMs(""));
      const claimed = await this.store.claimForgetDeliveries(this.settings.owner, now, maxTimeout + LEASE_MARGIN_MS, batch);
      attempts += claimed.length;
      for (let i = 0; i < claimed.length; i += CONCURRENT_DELIVERIES) {
        await Promise.all(claimed.slice(i, i + CONCURRENT_DELIVERIES).map((d) => this.deliver(d)));
      }
      if (claimed.length < batch) return attempts;
    }
  }

  private async deliver(d: ForgetDelivery): Promise<void> {
    const fields = { engineId: d.engineId, sessionId: d.sessionId, attempt: d.attempts };
    const instances = this.registry.instances(d.engineId);
    const target = instances.find((i) => !i.quarantine);
    if (!target) {
      const why = instances.length === 0 ? `engine "${d.engineId}" is not registered` : `engine "${d.engineId}" is quarantined`;
      return this.retry(d, why, fields);
    }
    if (!target.info.capabilities?.forget || !target.engine.forgetSession) {
      if (await this.settle(d, { done: true })) {
        this.observer.forgetDelivery?.(d.engineId, "unsupported");
        this.log.warn(fields, "engine does not implement ForgetSession (capabilities.forget): what it keeps of the deleted session stays");
      }
      return;
    }
    const deadlineMs = Date.now() + this.settings.timeoutMs(d.engineId);
    try {
      const answer = await target.engine.forgetSession(
        { session: { sessionId: d.sessionId, sessionKey: d.sessionKey, agentId: d.agentId }, reason: d.reason, deletedAtMs: d.deletedAtMs },
        { signal: this.task.signal, deadlineMs },
      );
      if (await this.settle(d, { done: true })) {
        this.observer.forgetDelivery?.(d.engineId, "delivered");
        this.log.info({ ...fields, purged: answer.purged }, "engine forgot the deleted session");
      }
    } catch (err) {
      await this.retry(d, (err as Error).message, fields);
    }
  }

  private async retry(d: ForgetDelivery, error: string, fields: object): Promise<void> {
    const exp = Math.min(this.settings.backoffMaxMs, this.settings.backoffInitialMs * 2 ** Math.min(30, d.attempts - 1));
    const delayMs = Math.round(exp / 2 + (Math.random() * exp) / 2);
    if (await this.settle(d, { done: false, retryAtMs: Date.now() + delayMs, error })) {
      this.observer.forgetDelivery?.(d.engineId, "failed");
      this.log.warn({ ...fields, err: error, retryInMs: delayMs }, "ForgetSession not delivered; retrying");
    }
  }

  /** False when the lease had passed to another replica (it settles the delivery), or the store failed (the lease runs out, and the delivery comes again). */
  private async settle(d: ForgetDelivery, outcome: Parameters<TranscriptStore["settleForgetDelivery"]>[2]): Promise<boolean> {
    try {
      return await this.store.settleForgetDelivery(d, this.settings.owner, outcome);
    } catch (err) {
      this.log.warn(
        { engineId: d.engineId, sessionId: d.sessionId, err: (err as Error).message },
        "could not record a ForgetSession attempt; it runs again when its lease ends",
      );
      return false;
    }
  }
}
