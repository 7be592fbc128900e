import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import type { QuarantineState } from "../contract/gen/contextd/v1/registry.js";

/**
 * Durable registry state: who owns each engine id (so ownership survives a contextd restart and
 * is shared by replicas) and quarantine records (SPEC §3: persisted, visible to every replica).
 */
export interface RegistryStore {
  /** Inserts or replaces the registration of `engineId`. */
  saveRegistration(registration: StoredRegistration): Promise<void>;
  deleteRegistration(engineId: string): Promise<boolean>;
  listRegistrations(): Promise<StoredRegistration[]>;

  /** Inserts or replaces the quarantine record of `engineId`. */
  saveQuarantine(engineId: string, quarantine: QuarantineState): Promise<void>;
  /** Removes the record; the ejection count lives on in `ejections` of the next record the caller writes. */
  clearQuarantine(engineId: string): Promise<boolean>;
  listQuarantines(): Promise<Map<string, QuarantineState>>;
}

export interface StoredRegistration {
  engineId: string;
  owner: string;
  endpoint: string;
  info: EngineInfo;
  protocolVersion: number;
  registeredAtMs: number;
}
