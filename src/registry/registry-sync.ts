import type { EngineDialing } from "./remote-engine.js";
import type { Logger } from "pino";
import { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import { EngineEventType, type Locality, type QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import type { RegistryChange, RegistryStore, RegistryWatch, StoredRegistration } from "../store/registry-store.js";
import { restoredEngine } from "./admission.js";
import type { EndpointChecker } from "./endpoint-allow-list.js";
import type { EngineEvents } from "./engine-events.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import { applicableRecord, type Quarantine } from "./quarantine.js";

export interface RegistrySyncSettings {
  /** How often the whole registry is read again, whatever the notifications said (engines.reconcile_interval). */
  reconcileIntervalMs: number;
  /** For the RemoteEngine of an engine registered at another replica. */
  dialing: EngineDialing;
  /** This replica's engines.allow_endpoints: an engine registered elsewhere dials only what it allows. */
  allowList: EndpointChecker;
}

/** What made a pass run: a notification, the listener's (re)connection, or the periodic reconcile. */
export type SyncVia = "notification" | "resync" | "reconcile";

/**
 * Keeps this replica's registry (engine-registry.ts) in step with the registrations and quarantine
 * records in the store, which other replicas write too (docs/deployment.md, "Engines and
 * quarantines across replicas"). The store's watch
 * (RegistryStore.watchRegistry: LISTEN/NOTIFY on PostgreSQL) says when something changed, within
 * milliseconds of the commit; a periodic reconcile (`engines.reconcile_interval`, 5 s) covers a
 * notification that was missed. Either way a pass reads both lists and applies the difference:
 *
 * - a registration this replica does not have, or a different one (owner, endpoint, registration
 *   time), gets a new RemoteEngine — without an admission probe: the admitting replica made it,
 *   and this replica's own health checks judge the engine from now on (one is run at once);
 * - an engine the store no longer has is deregistered (its channel closed);
 * - a quarantine record is applied as it is (a manual one holds until cleared, wherever it is
 *   cleared; an automatic one is released by this replica's own passing health check after its
 *   release time, like a local one), and a record that is gone releases the engine.
 *
 * Each change is announced on this replica's WatchEngines and logged ("… at another replica").
 * What this replica writes itself comes back as a notification too and then changes nothing.
 *
 * A pass never overrides a write of this replica that it might have read before it committed: an
 * engine with a local write in flight, or begun while the pass read the store
 * (EngineRegistry.beginLocalWrite), is left alone and the pass runs again once the write is over.
 * Passes never overlap; requests during one coalesce into one more.
 *
 * On SQLite (one process) the store has nothing to watch and this does nothing.
 */
export class RegistrySync {
  private watch: RegistryWatch | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private pending: SyncVia | undefined;
  private stopped = false;
  private connectedBefore = false;

  constructor(
    private readonly registry: EngineRegistry,
    private readonly store: RegistryStore,
    private readonly quarantine: Quarantine,
    private readonly events: EngineEvents,
    private readonly settings: RegistrySyncSettings,
    private readonly log: Logger,
    /** Told about an engine this replica learnt of from the store (the health monitor checks it). */
    private readonly onAdded: (engine: RegisteredEngine) => void = () => {},
  ) {}

  /** Starts watching the store (and the periodic reconcile, for a shared store). */
  start(): void {
    if (this.watch || this.stopped) return;
    this.watch = this.store.watchRegistry((change) => this.onChange(change), {
      onConnection: ({ connected, error }) => {
        if (!connected) {
          this.log.warn({ err: error?.message }, "registry listener lost its connection to the store; reconnecting (the reconcile covers what it misses)");
        } else {
          this.log.info({}, this.connectedBefore ? "registry listener reconnected" : "registry listener connected");
          this.connectedBefore = true;
        }
      },
    });
    if (!this.watch.shared) return;
    this.timer = setInterval(() => this.request("reconcile"), this.settings.reconcileIntervalMs);
    this.timer.unref();
  }

  /** Stops watching; resolves when a pass in progress is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.watch?.close();
    await this.running;
  }

  private onChange(change: RegistryChange): void {
    this.request(change.kind === "resync" ? "resync" : "notification");
  }

  private request(via: SyncVia): void {
    if (this.stopped) return;
    if (this.running) {
      // A notification names the reason better than a reconcile tick does.
      if (this.pending === undefined || this.pending === "reconcile") this.pending = via;
      return;
    }
    this.running = this.pass(via)
      .catch((err: unknown) => {
        // The store is down, say: the next notification or reconcile tries again.
        this.log.warn({ err: (err as Error).message, via }, "registry sync could not read the store");
      })
      .finally(() => {
        this.running = undefined;
        const next = this.pending;
        this.pending = undefined;
        if (next) this.request(next);
      });
  }

  private async pass(via: SyncVia): Promise<void> {
    await this.quarantine.persistPending();
    const before = new Map<string, { inFlight: number; seq: number }>();
    const mark = (id: string) => before.get(id) ?? { inFlight: 0, seq: 0 };
    for (const id of this.registry.localWriteIds()) before.set(id, this.registry.localWrites(id));
    const [registrations, quarantines, instanceQuarantines] = await Promise.all([
      this.store.listRegistrations(),
      this.store.listQuarantines(),
      this.store.listInstanceQuarantines(),
    ]);
    if (this.stopped) return;
    const stored = new Map<string, StoredRegistration[]>();
    for (const r of registrations) stored.set(r.engineId, [...(stored.get(r.engineId) ?? []), r]);
    const ids = new Set<string>([
      ...stored.keys(),
      ...this.registry
        .list()
        .filter((e) => !e.builtin)
        .map((e) => e.id),
    ]);
    const deferred: string[] = [];
    for (const id of ids) {
      const start = mark(id);
      const now = this.registry.localWrites(id);
      if (start.inFlight > 0 || now.inFlight > 0 || now.seq !== start.seq || this.quarantine.hasPending(id)) {
        deferred.push(id);
        continue;
      }
      this.apply(id, stored.get(id) ?? [], instanceQuarantines.get(id), quarantines.get(id), via);
    }
    // Read again once those writes are over (what they wrote is in the store then). A record whose
    // write failed waits for the next reconcile, which writes it again first.
    const settling = deferred.filter((id) => !this.quarantine.hasPending(id));
    if (settling.length > 0) {
      await Promise.all(settling.map((id) => this.registry.localWritesSettled(id)));
      this.pending ??= via;
    }
  }

  /** Makes engine `id`'s instances what the store says (synchronously: nothing can change them meanwhile). */
  private apply(
    id: string,
    stored: StoredRegistration[],
    own: Map<string, QuarantineState> | undefined,
    engineWide: QuarantineState | undefined,
    via: SyncVia,
  ): void {
    if (this.registry.get(id)?.builtin) return;
    const kept = new Set(stored.map((r) => r.instanceId));
    for (const current of this.registry.instances(id)) {
      if (kept.has(current.instanceId)) continue;
      this.registry.delete(id, current.instanceId);
      current.remote?.close();
      this.log.info({ engineId: id, instanceId: current.instanceId, owner: current.owner, via }, "engine deregistered at another replica");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_DEREGISTERED, current, "deregistered at another replica");
    }
    for (const r of stored) this.applyInstance(r, applicableRecord(own?.get(r.instanceId), engineWide), via);
  }

  private applyInstance(r: StoredRegistration, q: QuarantineState | undefined, via: SyncVia): void {
    const id = r.engineId;
    const current = this.registry.instance(id, r.instanceId);
    let engine = current;
    if (!engine || !sameRegistration(engine, r)) {
      if (engine?.remote && engine.endpoint === r.endpoint) {
        // Refreshed at the same address: keep the connection (and the calls in flight on it).
        engine.owner = r.owner;
        engine.info = r.info;
        engine.locality = r.locality;
        engine.remote.setInfo(r.info);
        engine.registeredAtMs = r.registeredAtMs;
      } else {
        engine = restoredEngine(r, this.settings.dialing, this.settings.allowList, current);
        this.registry.set(engine);
        current?.remote?.close();
      }
      const what = current ? "registration refreshed at another replica" : "registered at another replica";
      this.log.info({ engineId: id, instanceId: r.instanceId, owner: r.owner, endpoint: r.endpoint, via }, `engine ${what}`);
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_REGISTERED, engine, what);
      this.onAdded(engine);
    }
    const had = engine.quarantine;
    if (q && !sameQuarantine(had, q)) {
      engine.quarantine = q;
      engine.ejections = q.ejections;
      this.log.warn(
        {
          engineId: id,
          instanceId: r.instanceId,
          owner: engine.owner,
          operation: q.operation,
          reason: q.reason,
          manual: q.manual,
          ejections: q.ejections,
          releaseAtMs: q.releaseAtMs,
          via,
        },
        "engine quarantined at another replica",
      );
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED, engine, `${q.operation}: ${q.reason} (at another replica)`);
    } else if (!q && had) {
      engine.quarantine = undefined;
      engine.healthFailures = 0;
      this.log.info({ engineId: id, instanceId: r.instanceId, owner: engine.owner, via }, "engine released from quarantine at another replica");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_RELEASED, engine, "released at another replica");
    }
  }
}

function sameRegistration(e: RegisteredEngine, r: StoredRegistration): boolean {
  return (
    e.owner === r.owner &&
    e.endpoint === r.endpoint &&
    sameLocality(e.locality, r.locality) &&
    e.registeredAtMs === r.registeredAtMs &&
    Buffer.from(EngineInfo.encode(e.info).finish()).equals(Buffer.from(EngineInfo.encode(r.info).finish()))
  );
}

function sameLocality(a: Locality | undefined, b: Locality | undefined): boolean {
  return (a?.node ?? "") === (b?.node ?? "") && (a?.zone ?? "") === (b?.zone ?? "") && (a?.replica ?? "") === (b?.replica ?? "");
}

function sameQuarantine(a: QuarantineState | undefined, b: QuarantineState): boolean {
  return (
    a !== undefined &&
    a.operation === b.operation &&
    a.reason === b.reason &&
    a.failedAtMs === b.failedAtMs &&
    a.releaseAtMs === b.releaseAtMs &&
    a.ejections === b.ejections &&
    a.manual === b.manual
  );
}
