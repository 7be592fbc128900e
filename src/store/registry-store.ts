import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import type { Locality, QuarantineState } from "../contract/gen/contextd/v1/registry.js";

/** What {@link RegistryStore.claimRegistration} did: wrote it, or found the id held by `holder`. */
export type RegistrationClaim = { written: true } | { written: false; holder: StoredRegistration };

/**
 * Durable registry state: who owns each engine id and which instances serve it (so ownership
 * survives a contextd restart and is shared by replicas), and quarantine records (persisted, so
 * that a quarantine survives a restart and every replica sees it). docs/registry.md, "Instances":
 * one engine row per id (its owner, and its most recent instance, which older replicas read) and
 * one row per instance.
 */
export interface RegistryStore {
  /**
   * Writes the registration of one instance of `engineId` unless the id is held by another owner,
   * or — unless `refresh` — this instance is registered already. One transaction whose engine row
   * decides the owner, so that of two replicas admitting one new id for two owners at once exactly
   * one wins: ownership is decided by the database, not by a read that raced. When it does not
   * write, answers the registration that holds the id (the instance itself, for a refresh refused).
   */
  claimRegistration(registration: StoredRegistration, options: { refresh: boolean }): Promise<RegistrationClaim>;
  /**
   * Removes one instance of `engineId` (`instanceId`), or the engine and every instance (none):
   * the engine row goes with its last instance. False when there was nothing to remove. With
   * `registeredAtMs`, the instance only while its row is that registration (not one refreshed since
   * at another replica).
   */
  deleteRegistration(engineId: string, instanceId?: string, options?: { registeredAtMs?: number }): Promise<boolean>;
  /** Every instance of every engine, by engine id then instance id. */
  listRegistrations(): Promise<StoredRegistration[]>;

  /** Inserts or replaces the quarantine record of `engineId` as a whole, or of one instance. */
  saveQuarantine(engineId: string, quarantine: QuarantineState, instanceId?: string): Promise<void>;
  /**
   * Removes the record of one instance (`instanceId`), or the engine's and every instance's (none);
   * the ejection count lives on in `ejections` of the next record the caller writes.
   */
  clearQuarantine(engineId: string, instanceId?: string): Promise<boolean>;
  /** The records of engines as a whole (an operator's isolation of the engine), by engine id. */
  listQuarantines(): Promise<Map<string, QuarantineState>>;
  /** The records of instances: engine id → instance id → record. */
  listInstanceQuarantines(): Promise<Map<string, Map<string, QuarantineState>>>;

  /**
   * Tells `onChange` about registry writes made through ANY store on the same data — other
   * replicas' and this one's own — until the watch is closed (src/registry/registry-sync.ts
   * applies them). A change names the engine id and what happened; the records themselves are read
   * with listRegistrations / listQuarantines, so a change that arrives twice, late or out of order
   * does no harm. `{ kind: "resync" }` says changes may have been missed (the watch's connection was
   * lost and is back): re-read everything.
   *
   * PostgreSQL: every write sends a NOTIFY on channel `contextd_registry` in its own transaction,
   * and the watch LISTENs on a connection of its own (not the pool), reconnecting when it is lost.
   * SQLite: a single process, nothing to watch — `shared` is false and `onChange` is never called.
   */
  watchRegistry(onChange: (change: RegistryChange) => void, options?: RegistryWatchOptions): RegistryWatch;
}

/** One instance of an engine as stored. */
export interface StoredRegistration {
  engineId: string;
  /** RegisterEngineRequest.instance_id, or the endpoint when it named none. */
  instanceId: string;
  locality: Locality | undefined;
  owner: string;
  endpoint: string;
  info: EngineInfo;
  protocolVersion: number;
  registeredAtMs: number;
}

/** What a registry write did, as a watch reports it. */
export type RegistryChangeKind = "registered" | "deregistered" | "quarantined" | "released";

export type RegistryChange = { kind: RegistryChangeKind; engineId: string } | { kind: "resync"; engineId?: undefined };

export interface RegistryWatchOptions {
  /** Told when the watch's connection is lost (and reconnection begins) or comes back. */
  onConnection?: (event: { connected: boolean; error?: Error }) => void;
}

export interface RegistryWatch {
  /** True when other processes may change the records (PostgreSQL); false for SQLite. */
  readonly shared: boolean;
  /** True while the watch is listening (always true for an unshared store). */
  readonly connected: boolean;
  close(): Promise<void>;
}

/** The NOTIFY channel of the PostgreSQL store's registry writes. */
export const REGISTRY_CHANNEL = "contextd_registry";
