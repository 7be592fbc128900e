import { InvalidArgumentError } from "../contract/errors.js";
import { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import { QuarantineState } from "../contract/gen/contextd/v1/registry.js";
import type { StoredRegistration } from "./registry-store.js";

// The registry rows of the SQLite store (engine registrations and quarantines) and their mapping to
// and from the contract's messages; protobuf payloads are validated here so a bad record never
// reaches the database.

/** A row of engine_registrations. */
export interface RegistrationRow {
  engine_id: string;
  owner: string;
  endpoint: string;
  info: Uint8Array;
  protocol_version: number;
  registered_at_ms: number;
}

export function registrationRow(r: StoredRegistration): RegistrationRow {
  if (!r || typeof r !== "object") throw new InvalidArgumentError("registration is missing");
  if (typeof r.engineId !== "string" || r.engineId === "") {
    throw new InvalidArgumentError("registration: engine id is required");
  }
  const what = `registration of engine ${r.engineId}`;
  if (typeof r.owner !== "string" || r.owner.trim() === "") throw new InvalidArgumentError(`${what}: owner is required`);
  checkInteger(r.protocolVersion, `${what}: protocol version`);
  checkInteger(r.registeredAtMs, `${what}: registered_at_ms`);
  let info: Uint8Array;
  try {
    info = EngineInfo.encode(EngineInfo.fromPartial(r.info ?? {})).finish();
  } catch (err) {
    throw new InvalidArgumentError(`${what}: engine info cannot be encoded: ${(err as Error).message}`);
  }
  return {
    engine_id: r.engineId,
    owner: r.owner,
    endpoint: r.endpoint ?? "",
    info,
    protocol_version: r.protocolVersion,
    registered_at_ms: r.registeredAtMs,
  };
}

export function toStoredRegistration(row: RegistrationRow): StoredRegistration {
  return {
    engineId: row.engine_id,
    owner: row.owner,
    endpoint: row.endpoint,
    info: EngineInfo.decode(row.info),
    protocolVersion: row.protocol_version,
    registeredAtMs: row.registered_at_ms,
  };
}

/** A row of engine_quarantines. */
export interface QuarantineRow {
  engine_id: string;
  payload: Uint8Array;
  updated_at_ms: number;
}

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

function checkInteger(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(`${what} must be a non-negative integer, got ${String(n)}`);
  }
}
