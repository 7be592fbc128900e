import type { Logger } from "pino";
import { EngineEventType, type QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import type { RegistryStore } from "../store/registry-store.js";
import type { EngineEvents } from "./engine-events.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import {
  isFailure,
  PANIC_THRESHOLD,
  type EngineCallEnd,
  type EngineDegraded,
  type EngineCallObserver,
  type EngineFailover,
  type EngineFallback,
  type EngineOperation,
  type FailureKind,
} from "./engine-call-observer.js";
import { boundedText } from "../contract/quote.js";

/** The longest quarantine reason kept (an engine's error text within it is cut shorter still). */
const QUARANTINE_REASON_MAX_CHARS = 1024;

/** A degraded engine (too few instances serving) is logged at most this often. */
const DEGRADED_LOG_INTERVAL_MS = 10_000;

/** Bulkhead rejections of one engine are logged at most this often. */
const REJECTION_LOG_INTERVAL_MS = 1_000;

export interface QuarantineSettings {
  baseEjectionMs: number;
  maxEjectionMs: number;
}

/**
 * Health-based quarantine in the spirit of Envoy's outlier detection: one failure the engine caused
 * ejects it for base_ejection × consecutive ejections (capped); a passing health check after that
 * time releases it. A manual quarantine holds until an operator clears it. Every change is
 * persisted (so it survives restarts and is seen by replicas), announced on WatchEngines, and logged.
 */
export class Quarantine implements EngineCallObserver {
  /** Calls an engine's bulkhead turned away since the last warning about it, per engine. */
  private readonly rejections = new Map<string, { count: number; loggedAtMs: number }>();
  /** When each degraded engine was last logged as such. */
  private readonly degradedLoggedAtMs = new Map<string, number>();
  /** Instances whose last record write failed (persistPending writes them again), by engine id. */
  private readonly unpersisted = new Map<string, Set<string>>();

  constructor(
    private readonly registry: EngineRegistry,
    private readonly store: RegistryStore,
    private readonly settings: QuarantineSettings,
    private readonly events: EngineEvents,
    private readonly log: Logger,
  ) {}

  /** A call that failed by the engine's fault ejects it. */
  ended({ engine, op, outcome, reason }: EngineCallEnd): void {
    if (isFailure(outcome)) this.onEngineFailure(engine, op, outcome, reason ?? "");
  }

  fellBack({ selectedId, selected, op, kind, reason }: EngineFallback): void {
    if (isFailure(kind)) this.log.warn({ engineId: selectedId, owner: selected?.owner, operation: op, reason }, "engine call fell back to legacy");
  }

  rejected(engine: RegisteredEngine, op: EngineOperation, reason: string): void {
    this.onRejected(engine, op, reason);
  }

  /** Logged at most once every DEGRADED_LOG_INTERVAL_MS per engine: every request to it says so. */
  degraded({ engineId, serving, instances }: EngineDegraded): void {
    const now = Date.now();
    if (now - (this.degradedLoggedAtMs.get(engineId) ?? 0) < DEGRADED_LOG_INTERVAL_MS) return;
    this.degradedLoggedAtMs.set(engineId, now);
    this.log.warn(
      { engineId, serving, instances, threshold: PANIC_THRESHOLD },
      "engine serving with too few instances: the rest are quarantined, and legacy answers once none is left",
    );
  }

  failedOver({ engine, next, op, reason }: EngineFailover): void {
    this.log.warn(
      { engineId: engine.id, instanceId: engine.instanceId, nextInstanceId: next.instanceId, owner: engine.owner, operation: op, reason },
      "engine instance could not answer; the call went to another instance",
    );
  }

  onEngineFailure(engine: RegisteredEngine, op: EngineOperation, kind: FailureKind, reason: string): void {
    // An engine deregistered (or replaced) while the call ran is no longer the registry's to judge.
    if (engine.builtin || engine.quarantine || !this.registry.holds(engine)) return;
    void this.isolate(engine, op, `${kind}: ${reason}`, false, { afterAnswer: true });
  }

  /**
   * Saturation is load, not a fault: the engine is not quarantined. Under overload this can happen
   * thousands of times a second, so the warning comes at most once a second per engine, with the
   * number of calls turned away since the previous one.
   */
  onRejected(engine: RegisteredEngine, op: EngineOperation, reason: string): void {
    const now = Date.now();
    const r = this.rejections.get(engine.id) ?? { count: 0, loggedAtMs: 0 };
    r.count++;
    this.rejections.set(engine.id, r);
    if (now - r.loggedAtMs < REJECTION_LOG_INTERVAL_MS) return;
    this.log.warn({ engineId: engine.id, owner: engine.owner, operation: op, reason, rejected: r.count }, "engine at its concurrency limit: calls turned away");
    r.count = 0;
    r.loggedAtMs = now;
  }

  /**
   * Quarantines `engine` at once (routing, WatchEngines, the log); the record is then persisted.
   * `afterAnswer` (a failure seen on a runtime's call, which is answered by the fallback next): the
   * record is written in a later turn of the event loop, after that answer has been sent — the
   * store's write syncs to disk on the event loop (SQLite), milliseconds by which every fallback
   * answer was late (bench compaction_deadline). The registry sync does not apply the store's state
   * to this engine until the write is done (beginLocalWrite), and a failed write is retried there.
   */
  async isolate(engine: RegisteredEngine, operation: string, why: string, manual: boolean, opts: { afterAnswer?: boolean } = {}): Promise<void> {
    // Stored, and read by every runtime (GetEngine, ListEngines, WatchEngines): an operator's words
    // or an engine's error text, bounded and escaped here where every reason enters.
    const reason = boundedText(why, QUARANTINE_REASON_MAX_CHARS);
    const written = this.registry.beginLocalWrite(engine.id);
    const now = Date.now();
    const ejections = engine.ejections + 1;
    engine.ejections = ejections;
    const ejectionMs = Math.min(this.settings.baseEjectionMs * ejections, this.settings.maxEjectionMs);
    engine.quarantine = { operation, reason, failedAtMs: now, releaseAtMs: manual ? 0 : now + ejectionMs, ejections, manual };
    this.log.warn(
      {
        engineId: engine.id,
        instanceId: engine.instanceId,
        owner: engine.owner,
        operation,
        reason,
        manual,
        ejections,
        releaseAtMs: engine.quarantine.releaseAtMs,
      },
      "engine quarantined",
    );
    this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED, engine, `${operation}: ${reason}`);
    if (opts.afterAnswer) await new Promise<void>((resolve) => setImmediate(resolve));
    await this.persist(engine).finally(written);
  }

  /** Releases an automatic quarantine whose ejection time is over, given a passing health check. */
  async releaseIfDue(engine: RegisteredEngine): Promise<boolean> {
    const q = engine.quarantine;
    if (!q || q.manual || Date.now() < q.releaseAtMs) return false;
    await this.release(engine, "ejection time over and health check passed", false);
    return true;
  }

  /**
   * Operator's QuarantineEngine of a whole engine: every instance now, and — through the
   * engine-wide record — every instance that registers later, until cleared.
   */
  async isolateEngine(engineId: string, why: string): Promise<void> {
    const reason = boundedText(why, QUARANTINE_REASON_MAX_CHARS);
    const written = this.registry.beginLocalWrite(engineId);
    const now = Date.now();
    const record: QuarantineState = { operation: "manual", reason, failedAtMs: now, releaseAtMs: 0, ejections: 0, manual: true };
    try {
      for (const instance of this.registry.instances(engineId)) {
        instance.quarantine = { ...record, ejections: instance.ejections };
        this.log.warn({ engineId, instanceId: instance.instanceId, owner: instance.owner, operation: "manual", reason, manual: true }, "engine quarantined");
        this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED, instance, `manual: ${reason}`);
      }
      await this.store.saveQuarantine(engineId, record);
    } finally {
      written();
    }
  }

  /**
   * Operator's ClearQuarantine of one instance: releases any quarantine and forgets past ejections.
   * The stored record goes even when this replica had not applied it yet (another replica's, a
   * moment ago).
   */
  async clear(engine: RegisteredEngine, why: string): Promise<void> {
    await this.release(engine, why, true, true);
  }

  /** Operator's ClearQuarantine of a whole engine: the engine-wide record and every instance's. */
  async clearEngine(engineId: string, why: string): Promise<void> {
    const written = this.registry.beginLocalWrite(engineId);
    try {
      for (const instance of this.registry.instances(engineId)) await this.release(instance, why, true, false, false);
      await this.store.clearQuarantine(engineId);
      this.unpersisted.delete(engineId);
    } finally {
      written();
    }
  }

  /**
   * A successful registration clears an automatic quarantine (RegistryService.RegisterEngine in
   * proto/contextd/v1/registry.proto) — but not an
   * operator's: a manual quarantine holds until ClearQuarantine, even across engine restarts. The
   * stored record decides (another replica's quarantine may not have been applied here yet).
   */
  async onRegistered(engine: RegisteredEngine): Promise<void> {
    const stored = await this.stored(engine);
    if (stored?.manual && !engine.quarantine?.manual) {
      engine.quarantine = stored;
      engine.ejections = stored.ejections;
    }
    if (engine.quarantine?.manual) {
      this.log.info({ engineId: engine.id, owner: engine.owner }, "engine re-registered; its manual quarantine holds until cleared");
      return;
    }
    await this.release(engine, "re-registered", true, stored !== undefined);
  }

  /** The record of `instance`: its own, or its engine's (an operator's, which every instance inherits). */
  private async stored(instance: RegisteredEngine): Promise<QuarantineState | undefined> {
    try {
      const [own, engineWide] = await Promise.all([this.store.listInstanceQuarantines(), this.store.listQuarantines()]);
      return applicableRecord(own.get(instance.id)?.get(instance.instanceId), engineWide.get(instance.id));
    } catch (err) {
      this.log.error({ err, engineId: instance.id }, "could not read the quarantine record");
      return undefined;
    }
  }

  private async release(engine: RegisteredEngine, why: string, resetEjections: boolean, clearStored = false, persist = true): Promise<void> {
    const written = this.registry.beginLocalWrite(engine.id);
    try {
      const had = engine.quarantine;
      engine.quarantine = undefined;
      engine.healthFailures = 0;
      if (resetEjections) engine.ejections = 0;
      if (!had) {
        if (clearStored && persist) await this.persist(engine);
        return;
      }
      this.log.info({ engineId: engine.id, instanceId: engine.instanceId, owner: engine.owner, why }, "engine released from quarantine");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_RELEASED, engine, why);
      if (persist) await this.persist(engine);
    } finally {
      written();
    }
  }

  private async persist(engine: RegisteredEngine): Promise<void> {
    const pending = this.unpersisted.get(engine.id);
    try {
      if (engine.quarantine) await this.store.saveQuarantine(engine.id, engine.quarantine, engine.instanceId);
      else await this.store.clearQuarantine(engine.id, engine.instanceId);
      pending?.delete(engine.instanceId);
      if (pending?.size === 0) this.unpersisted.delete(engine.id);
    } catch (err) {
      if (pending) pending.add(engine.instanceId);
      else this.unpersisted.set(engine.id, new Set([engine.instanceId]));
      this.log.error(
        { err, engineId: engine.id, instanceId: engine.instanceId },
        "could not persist the quarantine record (written again at the next registry sync)",
      );
    }
  }

  /**
   * Writes again the records whose write failed (the store was down), before the registry sync
   * reads the store: otherwise the store's older state would undo this replica's decision.
   */
  async persistPending(): Promise<void> {
    for (const [id, instanceIds] of [...this.unpersisted]) {
      for (const instanceId of [...instanceIds]) {
        const engine = this.registry.instance(id, instanceId);
        if (!engine || engine.builtin) {
          instanceIds.delete(instanceId);
          continue;
        }
        const written = this.registry.beginLocalWrite(id);
        await this.persist(engine).finally(written);
      }
      if (instanceIds.size === 0) this.unpersisted.delete(id);
    }
  }

  /** Whether a record of an instance of `engineId` is waiting to be written again (persistPending). */
  hasPending(engineId: string): boolean {
    return this.unpersisted.has(engineId);
  }

  /** Applies persisted records to engines restored at start. */
  async restore(): Promise<void> {
    const [own, engineWide] = await Promise.all([this.store.listInstanceQuarantines(), this.store.listQuarantines()]);
    for (const engine of this.registry.allInstances()) {
      if (engine.builtin) continue;
      const q = applicableRecord(own.get(engine.id)?.get(engine.instanceId), engineWide.get(engine.id));
      if (!q) continue;
      engine.quarantine = q;
      engine.ejections = q.ejections;
    }
  }
}

/**
 * The record that holds for an instance: its engine's manual one (an operator isolated the whole
 * engine) over its own. An automatic engine-wide record — written by a replica older than instances —
 * is not applied: each instance's own checks judge it (docs/registry.md, "Instances").
 */
export function applicableRecord(own: QuarantineState | undefined, engineWide: QuarantineState | undefined): QuarantineState | undefined {
  return engineWide?.manual ? engineWide : own;
}
