import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import type { StoredRegistration } from "../registry-store.js";
import { quarantineRow, registrationRow, toStoredRegistration, type QuarantineRow, type RegistrationRow } from "../sqlite/registry-rows.js";
import { count, run, type PgDatabase } from "./database.js";
import { bytea } from "./rows.js";
import { SQL } from "./statements.js";

// PostgresStore's RegistryStore half: engine registrations and quarantine records, in the same
// database as the transcripts, so every replica reads the same ones. The records are validated and
// encoded by the SQLite store's functions (sqlite/registry-rows.ts): one definition of a valid
// record. Each call is a single statement; lists are ordered by engine id.

export async function saveRegistration(db: PgDatabase, registration: StoredRegistration): Promise<void> {
  const r = registrationRow(registration);
  await db.transaction((conn) => run(conn, SQL.saveRegistration, [r.engine_id, r.owner, r.endpoint, bytea(r.info), r.protocol_version, r.registered_at_ms]));
}

export async function deleteRegistration(db: PgDatabase, engineId: string): Promise<boolean> {
  return db.transaction(async (conn) => (await count(conn, SQL.deleteRegistration, [engineId])) > 0);
}

export async function listRegistrations(db: PgDatabase): Promise<StoredRegistration[]> {
  return db.read(async (conn) => (await run<RegistrationRow>(conn, SQL.listRegistrations)).map(toStoredRegistration));
}

export async function saveQuarantine(db: PgDatabase, engineId: string, quarantine: QuarantineState): Promise<void> {
  const q = quarantineRow(engineId, quarantine, Date.now());
  await db.transaction((conn) => run(conn, SQL.saveQuarantine, [q.engine_id, bytea(q.payload), q.updated_at_ms]));
}

export async function clearQuarantine(db: PgDatabase, engineId: string): Promise<boolean> {
  return db.transaction(async (conn) => (await count(conn, SQL.clearQuarantine, [engineId])) > 0);
}

export async function listQuarantines(db: PgDatabase): Promise<Map<string, QuarantineState>> {
  const rows = await db.read((conn) => run<QuarantineRow>(conn, SQL.listQuarantines));
  const out = new Map<string, QuarantineState>();
  for (const r of rows) out.set(r.engine_id, QuarantineState.decode(r.payload));
  return out;
}
