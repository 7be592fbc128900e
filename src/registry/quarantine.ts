import type { Logger } from "pino";
import { EngineEventType, type QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import type { RegistryStore } from "../store/registry-store.js";
import type { EngineEvents } from "./engine-events.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import { isFailure, type EngineCallEnd, type EngineCallObserver, type EngineFallback, type EngineOperation, type FailureKind } from "./engine-call-observer.js";
import { boundedText } from "../contract/quote.js";

/** The longest quarantine reason kept (an engine's error text within it is cut shorter still). */
const QUARANTINE_REASON_MAX_CHARS = 1024;

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
  /** Engines whose last record write failed (persistPending writes them again). */
  private readonly unpersisted = new Set<string>();

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

  onEngineFailure(engine: RegisteredEngine, op: EngineOperation, kind: FailureKind, reason: string): void {
    // An engine deregistered (or replaced) while the call ran is no longer the registry's to judge.
    if (engine.builtin || engine.quarantine || this.registry.get(engine.id) !== engine) return;
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
      { engineId: engine.id, owner: engine.owner, operation, reason, manual, ejections, releaseAtMs: engine.quarantine.releaseAtMs },
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
   * Operator's ClearQuarantine: releases any quarantine and forgets past ejections. The stored
   * record goes even when this replica had not applied it yet (another replica's, a moment ago).
   */
  async clear(engine: RegisteredEngine, why: string): Promise<void> {
    await this.release(engine, why, true, true);
  }

  /**
   * A successful registration clears an automatic quarantine (RegistryService.RegisterEngine in
   * proto/contextd/v1/registry.proto) — but not an
   * operator's: a manual quarantine holds until ClearQuarantine, even across engine restarts. The
   * stored record decides (another replica's quarantine may not have been applied here yet).
   */
  async onRegistered(engine: RegisteredEngine): Promise<void> {
    const stored = await this.stored(engine.id);
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

  private async stored(engineId: string): Promise<QuarantineState | undefined> {
    try {
      return (await this.store.listQuarantines()).get(engineId);
    } catch (err) {
      this.log.error({ err, engineId }, "could not read the quarantine record");
      return undefined;
    }
  }

  private async release(engine: RegisteredEngine, why: string, resetEjections: boolean, clearStored = false): Promise<void> {
    const written = this.registry.beginLocalWrite(engine.id);
    try {
      const had = engine.quarantine;
      engine.quarantine = undefined;
      engine.healthFailures = 0;
      if (resetEjections) engine.ejections = 0;
      if (!had) {
        if (clearStored) await this.persist(engine);
        return;
      }
      this.log.info({ engineId: engine.id, owner: engine.owner, why }, "engine released from quarantine");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_RELEASED, engine, why);
      await this.persist(engine);
    } finally {
      written();
    }
  }

  private async persist(engine: RegisteredEngine): Promise<void> {
    try {
      if (engine.quarantine) await this.store.saveQuarantine(engine.id, engine.quarantine);
      else await this.store.clearQuarantine(engine.id);
      this.unpersisted.delete(engine.id);
    } catch (err) {
      this.unpersisted.add(engine.id);
      this.log.error({ err, engineId: engine.id }, "could not persist the quarantine record (written again at the next registry sync)");
    }
  }

  /**
   * Writes again the records whose write failed (the store was down), before the registry sync
   * reads the store: otherwise the store's older state would undo this replica's decision.
   */
  async persistPending(): Promise<void> {
    for (const id of [...this.unpersisted]) {
      const engine = this.registry.get(id);
      if (!engine || engine.builtin) {
        this.unpersisted.delete(id);
        continue;
      }
      const written = this.registry.beginLocalWrite(id);
      await this.persist(engine).finally(written);
    }
  }

  /** Whether a record of `engineId` is waiting to be written again (persistPending). */
  hasPending(engineId: string): boolean {
    return this.unpersisted.has(engineId);
  }

  /** Applies persisted records to engines restored at start. */
  async restore(): Promise<void> {
    for (const [id, q] of await this.store.listQuarantines()) {
      const engine = this.registry.get(id);
      if (!engine || engine.builtin) continue;
      engine.quarantine = q;
      engine.ejections = q.ejections;
    }
  }
}
