import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import type { QuarantineState } from "../contract/gen/contextd/v1/registry.js";

/** What {@link RegistryStore.claimRegistration} did: wrote it, or found the id held by `holder`. */
export type RegistrationClaim = { written: true } | { written: false; holder: StoredRegistration };

/**
 * Durable registry state: who owns each engine id (so ownership survives a contextd restart and
 * is shared by replicas) and quarantine records (persisted, so that a quarantine survives a restart
 * and every replica sees it).
 */
export interface RegistryStore {
  /**
   * Writes the registration of `engineId` unless another holds the id: one of a different owner,
   * or — unless `refresh` — any. One conditional write, so that of two replicas admitting one id at
   * once exactly one wins: ownership is decided by the database, not by a read that raced. When it
   * does not write, answers the registration that holds the id.
   */
  claimRegistration(registration: StoredRegistration, options: { refresh: boolean }): Promise<RegistrationClaim>;
  deleteRegistration(engineId: string): Promise<boolean>;
  listRegistrations(): Promise<StoredRegistration[]>;

  /** Inserts or replaces the quarantine record of `engineId`. */
  saveQuarantine(engineId: string, quarantine: QuarantineState): Promise<void>;
  /** Removes the record; the ejection count lives on in `ejections` of the next record the caller writes. */
  clearQuarantine(engineId: string): Promise<boolean>;
  listQuarantines(): Promise<Map<string, QuarantineState>>;

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

export interface StoredRegistration {
  engineId: string;
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
