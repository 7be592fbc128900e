import type { ContextEngine } from "../contract/engine-api.js";
import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import { EngineHealth, type EngineStatus, type Locality, type QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import { EngineNotRegisteredError } from "../contract/errors.js";
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

/** One instance's own call counters, as reported in EngineInstance. */
export interface InstanceCounters {
  calls: number;
  failures: number;
  timeouts: number;
}

export function newInstanceCounters(): InstanceCounters {
  return { calls: 0, failures: 0, timeouts: 0 };
}

/**
 * One instance of an engine the registry knows: the built-in `legacy` one or an admitted sidecar
 * process (docs/registry.md, "Instances"). It is what the router calls, the quarantine ejects and
 * the health monitor checks; an engine id is the set of its instances (EngineRegistry.instances).
 */
export interface RegisteredEngine {
  /** The engine id, shared by its instances. */
  id: string;
  /** Which instance of the engine: RegisterEngineRequest.instance_id, or its endpoint. Empty for `legacy`. */
  instanceId: string;
  locality?: Locality;
  owner: string;
  /** Empty for the in-process engine. */
  endpoint: string;
  builtin: boolean;
  engine: ContextEngine;
  info: EngineInfo;
  registeredAtMs: number;
  health: EngineHealth;
  quarantine?: QuarantineState;
  /** The engine's counters, one object shared by all its instances (EngineStatus). */
  counters: EngineCounters;
  /** This instance's own (EngineInstance). */
  instanceCounters: InstanceCounters;
  /** The gRPC client of a sidecar (unset for `legacy`). */
  remote?: RemoteEngine;
  /** Failed health checks in a row. */
  healthFailures: number;
  /** When its health checks began failing (unset while they pass): how long it has been unreachable. */
  unhealthySinceMs?: number;
  /** Consecutive ejections; the next quarantine lasts base_ejection × (ejections + 1). */
  ejections: number;
  /**
   * Its engine's instances (EngineRegistry.set): what its status shows — after its removal, the
   * ones left.
   */
  peers?: ReadonlyMap<string, RegisteredEngine>;
}

/**
 * The set of engines contextd can route to, each a set of instances. `legacy` is always present,
 * owned by `core`, one instance. Admission of remote engines (ownership rules, contract validation,
 * quarantine) is layered on top of this map by the registration service; this class only holds the
 * state and renders it.
 */
export class EngineRegistry {
  private readonly engines = new Map<string, Map<string, RegisteredEngine>>();
  /** Local writes per engine id (see beginLocalWrite). */
  private readonly writes = new Map<string, LocalWrites>();
  /**
   * One at a time per engine id: registrations and deregistrations (admission.ts). Changes made at
   * other replicas are applied around local writes instead (beginLocalWrite, registry-sync.ts).
   */
  readonly locks = new KeyedLock();

  constructor(legacy: ContextEngine) {
    this.set({
      id: LEGACY_ENGINE_ID,
      instanceId: "",
      owner: CORE_OWNER,
      endpoint: "",
      builtin: true,
      engine: legacy,
      info: legacy.info(),
      registeredAtMs: Date.now(),
      health: EngineHealth.ENGINE_HEALTH_SERVING,
      counters: newCounters(),
      instanceCounters: newInstanceCounters(),
      healthFailures: 0,
      ejections: 0,
    });
  }

  get legacy(): RegisteredEngine {
    return this.get(LEGACY_ENGINE_ID)!;
  }

  /** The engine `id` as one instance stands for it: its most recently registered one. */
  get(id: string): RegisteredEngine | undefined {
    const instances = this.engines.get(id);
    return instances ? latest(instances) : undefined;
  }

  /** The instances of engine `id`, by instance id (none when it is not registered). */
  instances(id: string): RegisteredEngine[] {
    return [...(this.engines.get(id)?.values() ?? [])].sort((a, b) => compare(a.instanceId, b.instanceId));
  }

  /** One instance of `id`. */
  instance(id: string, instanceId: string): RegisteredEngine | undefined {
    return this.engines.get(id)?.get(instanceId);
  }

  /** Whether `instance` is still registered (not replaced, deregistered or removed meanwhile). */
  holds(instance: RegisteredEngine): boolean {
    return this.engines.get(instance.id)?.get(instance.instanceId) === instance;
  }

  /** One instance per engine (get), `legacy` first, then the sidecars by id. */
  list(): RegisteredEngine[] {
    return [...this.engines.keys()].map((id) => this.get(id)!).sort((a, b) => (a.builtin === b.builtin ? a.id.localeCompare(b.id) : a.builtin ? -1 : 1));
  }

  /** Every instance of every engine. */
  allInstances(): RegisteredEngine[] {
    return [...this.engines.values()].flatMap((m) => [...m.values()]);
  }

  /** Adds `engine` as an instance of its id, replacing one of the same instance id; it shares its engine's counters. */
  set(engine: RegisteredEngine): void {
    let instances = this.engines.get(engine.id);
    if (!instances) this.engines.set(engine.id, (instances = new Map()));
    const sibling = instances.values().next().value;
    if (sibling) engine.counters = sibling.counters;
    instances.set(engine.instanceId, engine);
    engine.peers = instances;
  }

  /** Removes one instance of `id`, or all of them (`instanceId` undefined); the engine goes with its last one. */
  delete(id: string, instanceId?: string): boolean {
    const instances = this.engines.get(id);
    if (!instances) return false;
    const removed = instanceId === undefined ? instances.size > 0 : instances.delete(instanceId);
    // Emptied, so that the removed instances' statuses show the engine gone (toEngineStatus).
    if (instanceId === undefined) instances.clear();
    if (instances.size === 0) this.engines.delete(id);
    return removed;
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

  /** What the router tells of each instance's load and locality, for statuses (Router sets it). */
  view: InstanceView = {};

  status(id: string): EngineStatus {
    const engine = this.get(id);
    if (!engine) throw new EngineNotRegisteredError(id);
    return toEngineStatus(engine, this.view);
  }
}

interface LocalWrites {
  inFlight: number;
  seq: number;
  idle: Array<() => void>;
}

/** The most recently registered instance (the last one set, of those registered at the same time). */
function latest(instances: ReadonlyMap<string, RegisteredEngine>): RegisteredEngine | undefined {
  let best: RegisteredEngine | undefined;
  for (const i of instances.values()) if (!best || i.registeredAtMs >= best.registeredAtMs) best = i;
  return best;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The better of two healths: SERVING over NOT_SERVING over UNKNOWN. */
const HEALTH_RANK: Record<number, number> = {
  [EngineHealth.ENGINE_HEALTH_SERVING]: 3,
  [EngineHealth.ENGINE_HEALTH_NOT_SERVING]: 2,
  [EngineHealth.ENGINE_HEALTH_UNKNOWN]: 1,
};

/**
 * The EngineStatus of the engine `e` is an instance of: its instances as they are now (none once
 * its last was removed — a DEREGISTERED event), the engine's fields from its most recent one.
 * `outstanding` tells the calls in flight to an instance and `local` whether it is this replica's
 * (the router's); without them, 0 and false.
 */
export function toEngineStatus(e: RegisteredEngine, view: InstanceView = {}): EngineStatus {
  // Removed (its engine's set no longer holds it): the others, none once it was the last.
  const live = e.builtin ? [] : e.peers ? [...e.peers.values()] : [e];
  const top = (e.peers && e.peers.size > 0 ? latest(e.peers) : undefined) ?? e;
  const instances = [...live].sort((a, b) => compare(a.instanceId, b.instanceId));
  const health = instances.reduce((best, i) => ((HEALTH_RANK[i.health] ?? 0) > (HEALTH_RANK[best] ?? 0) ? i.health : best), top.health);
  // The engine is quarantined as a whole when none of its instances is free (then it says why
  // with the most recent instance's record).
  const quarantine =
    instances.length > 0 && instances.every((i) => i.quarantine) ? (top.quarantine ?? instances.find((i) => i.quarantine)!.quarantine) : undefined;
  return {
    engineId: e.id,
    owner: top.owner,
    endpoint: top.endpoint,
    info: top.info,
    health,
    quarantine,
    registeredAtMs: top.registeredAtMs,
    calls: e.counters.calls,
    failures: e.counters.failures,
    fallbacks: e.counters.fallbacks,
    fallbacksByReason: { ...e.counters.fallbacksByReason },
    timeouts: e.counters.timeouts,
    builtin: e.builtin,
    instances: instances.map((i) => ({
      instanceId: i.instanceId,
      endpoint: i.endpoint,
      locality: i.locality,
      health: i.health,
      quarantine: i.quarantine,
      registeredAtMs: i.registeredAtMs,
      outstandingCalls: view.outstanding?.(i) ?? 0,
      calls: i.instanceCounters.calls,
      failures: i.instanceCounters.failures,
      timeouts: i.instanceCounters.timeouts,
      version: i.info.version,
      local: view.local?.(i) ?? false,
    })),
  };
}

/** What only the router knows of an instance, for its status. */
export interface InstanceView {
  outstanding?: (instance: RegisteredEngine) => number;
  local?: (instance: RegisteredEngine) => boolean;
}
