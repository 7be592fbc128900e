import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import type { RegistrationClaim, StoredRegistration } from "../registry-store.js";
import { quarantineRow, registrationRow, toStoredRegistration } from "../registry-rows.js";
import type { Statements } from "./statements.js";

// SqliteStore's RegistryStore half: engine registrations and quarantine records, which live in the
// same database file as the transcripts. Each call is a single statement, so none needs an explicit
// transaction; lists are ordered by engine id.

export function claimRegistration(stmts: Statements, registration: StoredRegistration, refresh: boolean): RegistrationClaim {
  const row = registrationRow(registration);
  if (stmts.claimRegistration.run({ ...row, refresh: refresh ? 1 : 0 }).changes > 0) return { written: true };
  return { written: false, holder: toStoredRegistration(stmts.registration.get(row.engine_id)!) };
}

export function deleteRegistration(stmts: Statements, engineId: string): boolean {
  return stmts.deleteRegistration.run(engineId).changes > 0;
}

export function listRegistrations(stmts: Statements): StoredRegistration[] {
  return stmts.listRegistrations.all().map(toStoredRegistration);
}

export function saveQuarantine(stmts: Statements, engineId: string, quarantine: QuarantineState): void {
  stmts.saveQuarantine.run(quarantineRow(engineId, quarantine, Date.now()));
}

export function clearQuarantine(stmts: Statements, engineId: string): boolean {
  return stmts.clearQuarantine.run(engineId).changes > 0;
}

export function listQuarantines(stmts: Statements): Map<string, QuarantineState> {
  const out = new Map<string, QuarantineState>();
  for (const r of stmts.listQuarantines.all()) out.set(r.engine_id, QuarantineState.decode(r.payload));
  return out;
}
