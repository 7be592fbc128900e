import { InvalidArgumentError } from "../contract/errors.js";
import { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import { Locality, QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import type { StoredRegistration } from "./registry-store.js";

// The registry rows of both stores (engines, their instances, quarantines) and their mapping to
// and from the contract's messages; protobuf payloads are validated here so a bad record never
// reaches the database.

/** A row of engine_registrations: the id's owner, and its most recently registered instance. */
export interface RegistrationRow {
  engine_id: string;
  owner: string;
  endpoint: string;
  info: Uint8Array;
  protocol_version: number;
  registered_at_ms: number;
}

/** A row of engine_instances. */
export interface InstanceRow {
  engine_id: string;
  instance_id: string;
  endpoint: string;
  locality: Uint8Array;
  info: Uint8Array;
  protocol_version: number;
  registered_at_ms: number;
}

/** An instance row read with its engine's owner. */
export type OwnedInstanceRow = InstanceRow & { owner: string };

/** The engine row and the instance row of one registration. */
export function registrationRows(r: StoredRegistration): { engine: RegistrationRow; instance: InstanceRow } {
  if (!r || typeof r !== "object") throw new InvalidArgumentError("registration is missing");
  if (typeof r.engineId !== "string" || r.engineId === "") {
    throw new InvalidArgumentError("registration: engine id is required");
  }
  const what = `registration of engine ${r.engineId}`;
  if (typeof r.owner !== "string" || r.owner.trim() === "") throw new InvalidArgumentError(`${what}: owner is required`);
  checkInteger(r.protocolVersion, `${what}: protocol version`);
  checkInteger(r.registeredAtMs, `${what}: registered_at_ms`);
  let info: Uint8Array;
  let locality: Uint8Array;
  try {
    info = EngineInfo.encode(EngineInfo.fromPartial(r.info ?? {})).finish();
    locality = Locality.encode(Locality.fromPartial(r.locality ?? {})).finish();
  } catch (err) {
    throw new InvalidArgumentError(`${what}: engine info or locality cannot be encoded: ${(err as Error).message}`);
  }
  const endpoint = r.endpoint ?? "";
  // An instance named by nothing is its endpoint (docs/registry.md, "Instances").
  const instanceId = r.instanceId || endpoint;
  if (!instanceId) throw new InvalidArgumentError(`${what}: an instance id or an endpoint is required`);
  const common = { engine_id: r.engineId, endpoint, info, protocol_version: r.protocolVersion, registered_at_ms: r.registeredAtMs };
  return { engine: { ...common, owner: r.owner }, instance: { ...common, instance_id: instanceId, locality } };
}

export function toStoredRegistration(row: OwnedInstanceRow): StoredRegistration {
  return {
    engineId: row.engine_id,
    instanceId: row.instance_id,
    locality: row.locality.length > 0 ? Locality.decode(row.locality) : undefined,
    owner: row.owner,
    endpoint: row.endpoint,
    info: EngineInfo.decode(row.info),
    protocolVersion: row.protocol_version,
    registeredAtMs: row.registered_at_ms,
  };
}

/**
 * An engine row with no instance rows (written by a replica older than instances, or copied by an
 * older migrate-store) is one instance named by its endpoint.
 */
export function engineRowAsInstance(row: RegistrationRow): OwnedInstanceRow {
  return { ...row, instance_id: row.endpoint, locality: new Uint8Array() };
}

/** Instances read from both tables, in the order the store promises: engine id, then instance id. */
export function storedRegistrations(instances: OwnedInstanceRow[], bareEngines: RegistrationRow[]): StoredRegistration[] {
  return [...instances, ...bareEngines.map(engineRowAsInstance)]
    .map(toStoredRegistration)
    .sort((a, b) => compare(a.engineId, b.engineId) || compare(a.instanceId, b.instanceId));
}

/** Byte order, as the stores' ORDER BY (COLLATE "C" / BINARY). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A row of engine_quarantines (an engine as a whole) or, with `instance_id`, of engine_instance_quarantines. */
export interface QuarantineRow {
  engine_id: string;
  payload: Uint8Array;
  updated_at_ms: number;
}

export type InstanceQuarantineRow = QuarantineRow & { instance_id: string };

export function quarantineRow(engineId: string, q: QuarantineState, nowMs: number): QuarantineRow {
  if (typeof engineId !== "string" || engineId === "") throw new InvalidArgumentError("quarantine: engine id is required");
  if (!q || typeof q !== "object") throw new InvalidArgumentError(`quarantine of engine ${engineId}: state is missing`);
  let payload: Uint8Array;
  try {
    payload = QuarantineState.encode(QuarantineState.fromPartial(q)).finish();
  } catch (err) {
    throw new InvalidArgumentError(`quarantine of engine ${engineId} cannot be encoded: ${(err as Error).message}`);
  }
  return { engine_id: engineId, payload, updated_at_ms: nowMs };
}

/** engine id → instance id → record. */
export function instanceQuarantines(rows: InstanceQuarantineRow[]): Map<string, Map<string, QuarantineState>> {
  const out = new Map<string, Map<string, QuarantineState>>();
  for (const r of rows) {
    let m = out.get(r.engine_id);
    if (!m) out.set(r.engine_id, (m = new Map()));
    m.set(r.instance_id, QuarantineState.decode(r.payload));
  }
  return out;
}

function checkInteger(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(`${what} must be a non-negative integer, got ${String(n)}`);
  }
}
