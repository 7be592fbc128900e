import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import { REGISTRY_CHANNEL, type RegistrationClaim, type RegistryChangeKind, type StoredRegistration } from "../registry-store.js";
import { quarantineRow, registrationRow, toStoredRegistration, type QuarantineRow, type RegistrationRow } from "../registry-rows.js";
import { count, run, type Conn, type PgDatabase } from "./database.js";
import { bytea } from "./rows.js";
import { SQL } from "./statements.js";

// PostgresStore's RegistryStore half: engine registrations and quarantine records, in the same
// database as the transcripts, so every replica reads the same ones. The records are validated and
// encoded by the stores' shared functions (../registry-rows.ts): one definition of a valid
// record. Each write is one statement plus a NOTIFY on channel `contextd_registry` in the same
// transaction — PostgreSQL delivers it to every listening replica when (and only if) the write
// commits (registry-listener.ts); lists are ordered by engine id.

/** The NOTIFY payload: which engine, and what happened to it. */
export interface RegistryNotification {
  engine_id: string;
  change: RegistryChangeKind;
}

function notify(conn: Conn, engineId: string, change: RegistryChangeKind): Promise<unknown> {
  const payload: RegistryNotification = { engine_id: engineId, change };
  return run(conn, SQL.notifyRegistry, [REGISTRY_CHANNEL, JSON.stringify(payload)]);
}

export async function claimRegistration(db: PgDatabase, registration: StoredRegistration, refresh: boolean): Promise<RegistrationClaim> {
  const r = registrationRow(registration);
  return db.transaction(async (conn): Promise<RegistrationClaim> => {
    // Two replicas claiming one new id: the second INSERT waits on the first's uncommitted row,
    // then takes the conflict path and its WHERE decides.
    const written = await run(conn, SQL.claimRegistration, [r.engine_id, r.owner, r.endpoint, bytea(r.info), r.protocol_version, r.registered_at_ms, refresh]);
    if (written.length === 0) {
      const [holder] = await run<RegistrationRow>(conn, SQL.registration, [r.engine_id]);
      return { written: false, holder: toStoredRegistration(holder) };
    }
    await notify(conn, r.engine_id, "registered");
    return { written: true };
  });
}

export async function deleteRegistration(db: PgDatabase, engineId: string): Promise<boolean> {
  return db.transaction(async (conn) => {
    const deleted = (await count(conn, SQL.deleteRegistration, [engineId])) > 0;
    if (deleted) await notify(conn, engineId, "deregistered");
    return deleted;
  });
}

export async function listRegistrations(db: PgDatabase): Promise<StoredRegistration[]> {
  return db.read(async (conn) => (await run<RegistrationRow>(conn, SQL.listRegistrations)).map(toStoredRegistration));
}

export async function saveQuarantine(db: PgDatabase, engineId: string, quarantine: QuarantineState): Promise<void> {
  const q = quarantineRow(engineId, quarantine, Date.now());
  await db.transaction(async (conn) => {
    await run(conn, SQL.saveQuarantine, [q.engine_id, bytea(q.payload), q.updated_at_ms]);
    await notify(conn, q.engine_id, "quarantined");
  });
}

export async function clearQuarantine(db: PgDatabase, engineId: string): Promise<boolean> {
  return db.transaction(async (conn) => {
    const cleared = (await count(conn, SQL.clearQuarantine, [engineId])) > 0;
    if (cleared) await notify(conn, engineId, "released");
    return cleared;
  });
}

export async function listQuarantines(db: PgDatabase): Promise<Map<string, QuarantineState>> {
  const rows = await db.read((conn) => run<QuarantineRow>(conn, SQL.listQuarantines));
  const out = new Map<string, QuarantineState>();
  for (const r of rows) out.set(r.engine_id, QuarantineState.decode(r.payload));
  return out;
}
