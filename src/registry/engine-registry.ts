import type { ContextEngine } from "../contract/engine-api.js";
import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import { EngineHealth, type EngineStatus, type QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import { NotFoundError } from "../contract/errors.js";
import { CORE_OWNER, LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { KeyedLock } from "./keyed-lock.js";
import type { RemoteEngine } from "./remote-engine.js";

/** Per-engine call counters, as reported in EngineStatus. */
export interface EngineCounters {
  calls: number;
  failures: number;
  /** Calls answered by `legacy` instead of this engine, in all and by reason (engine-call-observer.ts FallbackKind). */
  fallbacks: number;
  fallbacksByReason: Record<string, number>;
  timeouts: number;
}

export function newCounters(): EngineCounters {
  return { calls: 0, failures: 0, fallbacks: 0, fallbacksByReason: {}, timeouts: 0 };
}

/** An engine the registry knows: the built-in `legacy` one or an admitted sidecar. */
export interface RegisteredEngine {
  id: string;
  owner: string;
  /** Empty for the in-process engine. */
  endpoint: string;
  builtin: boolean;
  engine: ContextEngine;
  info: EngineInfo;
  registeredAtMs: number;
  health: EngineHealth;
  quarantine?: QuarantineState;
  counters: EngineCounters;
  /** The gRPC client of a sidecar (unset for `legacy`). */
  remote?: RemoteEngine;
  /** Failed health checks in a row. */
  healthFailures: number;
  /** Consecutive ejections; the next quarantine lasts base_ejection × (ejections + 1). */
  ejections: number;
}

/**
 * The set of engines contextd can route to. `legacy` is always present and owned by `core`.
 * Admission of remote engines (ownership rules, contract validation, quarantine) is layered on top
 * of this map by the registration service; this class only holds the state and renders it.
 */
export class EngineRegistry {
  private readonly engines = new Map<string, RegisteredEngine>();
  /** Local writes per engine id (see beginLocalWrite). */
  private readonly writes = new Map<string, LocalWrites>();
  /**
   * One at a time per engine id: registrations and deregistrations (admission.ts). Changes made at
   * other replicas are applied around local writes instead (beginLocalWrite, registry-sync.ts).
   */
  readonly locks = new KeyedLock();

  constructor(legacy: ContextEngine) {
    this.engines.set(LEGACY_ENGINE_ID, {
      id: LEGACY_ENGINE_ID,
      owner: CORE_OWNER,
      endpoint: "",
      builtin: true,
      engine: legacy,
      info: legacy.info(),
      registeredAtMs: Date.now(),
      health: EngineHealth.ENGINE_HEALTH_SERVING,
      counters: newCounters(),
      healthFailures: 0,
      ejections: 0,
    });
  }

  get legacy(): RegisteredEngine {
    return this.engines.get(LEGACY_ENGINE_ID)!;
  }

  get(id: string): RegisteredEngine | undefined {
    return this.engines.get(id);
  }

  list(): RegisteredEngine[] {
    return [...this.engines.values()].sort((a, b) => (a.builtin === b.builtin ? a.id.localeCompare(b.id) : a.builtin ? -1 : 1));
  }

  set(engine: RegisteredEngine): void {
    this.engines.set(engine.id, engine);
  }

  delete(id: string): boolean {
    return this.engines.delete(id);
  }

  /**
   * Marks the start of a change this replica makes to `id` in memory and then in the store (a
   * registration, a quarantine, a release); call the returned function once the store write is
   * over. RegistrySync applies what the store says only to engines with no local write in flight
   * and none begun while it read the store: its snapshot might predate the local write.
   */
  beginLocalWrite(id: string): () => void {
    let w = this.writes.get(id);
    if (!w) this.writes.set(id, (w = { inFlight: 0, seq: 0, idle: [] }));
    w.inFlight++;
    w.seq++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      w.inFlight--;
      if (w.inFlight > 0) return;
      for (const resolve of w.idle.splice(0)) resolve();
    };
  }

  /** Every engine id this replica ever wrote locally. */
  localWriteIds(): string[] {
    return [...this.writes.keys()];
  }

  /** Where local writes to `id` stand: `seq` moves at each one begun. */
  localWrites(id: string): { inFlight: number; seq: number } {
    const w = this.writes.get(id);
    return { inFlight: w?.inFlight ?? 0, seq: w?.seq ?? 0 };
  }

  /** Resolves once no local write to `id` is in flight. */
  localWritesSettled(id: string): Promise<void> {
    const w = this.writes.get(id);
    if (!w || w.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => w.idle.push(resolve));
  }

  status(id: string): EngineStatus {
    const engine = this.engines.get(id);
    if (!engine) throw new NotFoundError(`engine_id "${id}" is not registered`);
    return toEngineStatus(engine);
  }
}

interface LocalWrites {
  inFlight: number;
  seq: number;
  idle: Array<() => void>;
}

export function toEngineStatus(e: RegisteredEngine): EngineStatus {
  return {
    engineId: e.id,
    owner: e.owner,
    endpoint: e.endpoint,
    info: e.info,
    health: e.health,
    quarantine: e.quarantine,
    registeredAtMs: e.registeredAtMs,
    calls: e.counters.calls,
    failures: e.counters.failures,
    fallbacks: e.counters.fallbacks,
    fallbacksByReason: { ...e.counters.fallbacksByReason },
    timeouts: e.counters.timeouts,
    builtin: e.builtin,
    instances: e.builtin
      ? []
      : [
          {
            instanceId: e.endpoint,
            endpoint: e.endpoint,
            locality: undefined,
            health: e.health,
            quarantine: e.quarantine,
            registeredAtMs: e.registeredAtMs,
            outstandingCalls: 0,
            calls: e.counters.calls,
            failures: e.counters.failures,
            timeouts: e.counters.timeouts,
            version: e.info.version,
            local: false,
          },
        ],
  };
}
