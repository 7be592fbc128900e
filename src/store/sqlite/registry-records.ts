import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import type Database from "better-sqlite3";
import type { RegistrationClaim, StoredRegistration } from "../registry-store.js";
import { engineRowAsInstance, instanceQuarantines, quarantineRow, registrationRows, storedRegistrations, toStoredRegistration } from "../registry-rows.js";
import type { Statements } from "./statements.js";

// SqliteStore's RegistryStore half: engines, their instances and quarantine records, which live in
// the same database file as the transcripts. A claim or a deregistration touches both the engine
// row and an instance row in one IMMEDIATE transaction; lists are ordered by engine id.

export function claimRegistration(db: Database.Database, stmts: Statements, registration: StoredRegistration, refresh: boolean): RegistrationClaim {
  const { engine, instance } = registrationRows(registration);
  const claim = db.transaction((): RegistrationClaim => {
    const held = stmts.registration.get(engine.engine_id);
    if (held && held.owner !== engine.owner) return { written: false, holder: holderOf(stmts, held) };
    const existing = held ? stmts.instance.get(instance.engine_id, instance.instance_id) : undefined;
    if (existing && !refresh) return { written: false, holder: toStoredRegistration({ ...existing, owner: held!.owner }) };
    // Rows an older replica's deregistration left behind belong to nobody now.
    if (!held) stmts.deleteInstances.run(engine.engine_id);
    // The engine row follows the most recent registration (what older replicas read).
    stmts.saveRegistration.run(engine);
    stmts.saveInstance.run(instance);
    return { written: true };
  });
  return claim.immediate();
}

/** The registration that holds an id: its most recent instance. */
function holderOf(stmts: Statements, held: { engine_id: string; owner: string } & Parameters<typeof engineRowAsInstance>[0]): StoredRegistration {
  const latest = stmts.latestInstance.get(held.engine_id);
  return toStoredRegistration(latest ? { ...latest, owner: held.owner } : engineRowAsInstance(held));
}

export function deleteRegistration(db: Database.Database, stmts: Statements, engineId: string, instanceId?: string, registeredAtMs?: number): boolean {
  const remove = db.transaction((): boolean => {
    const held = stmts.registration.get(engineId);
    if (instanceId === undefined) {
      stmts.deleteInstances.run(engineId);
      return held !== undefined && stmts.deleteRegistration.run(engineId).changes > 0;
    }
    if (!held) return false;
    if (registeredAtMs !== undefined && stmts.instance.get(engineId, instanceId)?.registered_at_ms !== registeredAtMs) return false;
    const removed = stmts.deleteInstance.run(engineId, instanceId).changes > 0;
    const latest = stmts.latestInstance.get(engineId);
    // The engine row alone is the instance named by its endpoint (written before instances).
    if (!removed && (latest || held.endpoint !== instanceId)) return false;
    if (!latest) stmts.deleteRegistration.run(engineId);
    else stmts.saveRegistration.run({ ...latest, owner: held.owner });
    return true;
  });
  return remove.immediate();
}

export function listRegistrations(stmts: Statements): StoredRegistration[] {
  return storedRegistrations(stmts.listInstances.all(), stmts.bareRegistrations.all());
}

export function saveQuarantine(stmts: Statements, engineId: string, quarantine: QuarantineState, instanceId?: string): void {
  const row = quarantineRow(engineId, quarantine, Date.now());
  if (instanceId === undefined) stmts.saveQuarantine.run(row);
  else stmts.saveInstanceQuarantine.run({ ...row, instance_id: instanceId });
}

export function clearQuarantine(db: Database.Database, stmts: Statements, engineId: string, instanceId?: string): boolean {
  if (instanceId !== undefined) return stmts.clearInstanceQuarantine.run(engineId, instanceId).changes > 0;
  const clear = db.transaction(() => stmts.clearQuarantine.run(engineId).changes + stmts.clearInstanceQuarantines.run(engineId).changes > 0);
  return clear.immediate();
}

export function listQuarantines(stmts: Statements): Map<string, QuarantineState> {
  const out = new Map<string, QuarantineState>();
  for (const r of stmts.listQuarantines.all()) out.set(r.engine_id, QuarantineState.decode(r.payload));
  return out;
}

export function listInstanceQuarantines(stmts: Statements): Map<string, Map<string, QuarantineState>> {
  return instanceQuarantines(stmts.listInstanceQuarantines.all());
}
