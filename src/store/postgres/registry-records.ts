import { QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import { REGISTRY_CHANNEL, type RegistrationClaim, type RegistryChangeKind, type StoredRegistration } from "../registry-store.js";
import {
  engineRowAsInstance,
  instanceQuarantines,
  quarantineRow,
  registrationRows,
  storedRegistrations,
  toStoredRegistration,
  type InstanceQuarantineRow,
  type InstanceRow,
  type OwnedInstanceRow,
  type QuarantineRow,
  type RegistrationRow,
} from "../registry-rows.js";
import { count, run, type Conn, type PgDatabase } from "./database.js";
import { bytea } from "./rows.js";
import { SQL } from "./statements.js";

// PostgresStore's RegistryStore half: engines, their instances and quarantine records, in the same
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
  const { engine: e, instance: i } = registrationRows(registration);
  return db.transaction(async (conn): Promise<RegistrationClaim> => {
    // Two replicas claiming one id: the second waits on the first's row lock (its uncommitted
    // insert, or the no-op update), then sees the first's owner.
    const [held] = await run<RegistrationRow & { inserted: boolean }>(conn, SQL.lockRegistration, [
      e.engine_id,
      e.owner,
      e.endpoint,
      bytea(e.info),
      e.protocol_version,
      e.registered_at_ms,
    ]);
    if (held.owner !== e.owner) return { written: false, holder: await holderOf(conn, held) };
    if (held.inserted) {
      // Rows an older replica's deregistration left behind belong to nobody now.
      await run(conn, SQL.deleteInstances, [e.engine_id]);
    } else {
      const [existing] = await run<InstanceRow>(conn, SQL.instance, [i.engine_id, i.instance_id]);
      if (existing && !refresh) return { written: false, holder: toStoredRegistration({ ...existing, owner: held.owner }) };
      // The engine row follows the most recent registration (what older replicas read).
      await run(conn, SQL.saveRegistration, [e.engine_id, e.endpoint, bytea(e.info), e.protocol_version, e.registered_at_ms]);
    }
    await run(conn, SQL.saveInstance, [i.engine_id, i.instance_id, i.endpoint, bytea(i.locality), bytea(i.info), i.protocol_version, i.registered_at_ms]);
    await notify(conn, e.engine_id, "registered");
    return { written: true };
  });
}

/** The registration that holds an id: its most recent instance. */
async function holderOf(conn: Conn, held: RegistrationRow): Promise<StoredRegistration> {
  const [latest] = await run<InstanceRow>(conn, SQL.latestInstance, [held.engine_id]);
  return toStoredRegistration(latest ? { ...latest, owner: held.owner } : engineRowAsInstance(held));
}

export async function deleteRegistration(db: PgDatabase, engineId: string, instanceId?: string, registeredAtMs?: number): Promise<boolean> {
  return db.transaction(async (conn) => {
    const [held] = await run<RegistrationRow>(conn, SQL.registration, [engineId]);
    let deleted: boolean;
    if (instanceId === undefined) {
      await run(conn, SQL.deleteInstances, [engineId]);
      deleted = held !== undefined && (await count(conn, SQL.deleteRegistration, [engineId])) > 0;
    } else if (!held) {
      deleted = false;
    } else if (
      registeredAtMs !== undefined &&
      Number((await run<InstanceRow>(conn, SQL.instance, [engineId, instanceId]))[0]?.registered_at_ms) !== registeredAtMs
    ) {
      // Refreshed since (at another replica): not the registration the caller means to remove.
      deleted = false;
    } else {
      const removed = (await count(conn, SQL.deleteInstance, [engineId, instanceId])) > 0;
      const [latest] = await run<InstanceRow>(conn, SQL.latestInstance, [engineId]);
      // The engine row alone is the instance named by its endpoint (written before instances).
      deleted = removed || (!latest && held.endpoint === instanceId);
      if (deleted && !latest) await run(conn, SQL.deleteRegistration, [engineId]);
      else if (deleted && latest)
        await run(conn, SQL.saveRegistration, [engineId, latest.endpoint, bytea(latest.info), latest.protocol_version, latest.registered_at_ms]);
    }
    if (deleted) await notify(conn, engineId, "deregistered");
    return deleted;
  });
}

export async function listRegistrations(db: PgDatabase): Promise<StoredRegistration[]> {
  return db.read(async (conn) =>
    storedRegistrations(await run<OwnedInstanceRow>(conn, SQL.listInstances), await run<RegistrationRow>(conn, SQL.bareRegistrations)),
  );
}

export async function saveQuarantine(db: PgDatabase, engineId: string, quarantine: QuarantineState, instanceId?: string): Promise<void> {
  const q = quarantineRow(engineId, quarantine, Date.now());
  await db.transaction(async (conn) => {
    if (instanceId === undefined) await run(conn, SQL.saveQuarantine, [q.engine_id, bytea(q.payload), q.updated_at_ms]);
    else await run(conn, SQL.saveInstanceQuarantine, [q.engine_id, instanceId, bytea(q.payload), q.updated_at_ms]);
    await notify(conn, q.engine_id, "quarantined");
  });
}

export async function clearQuarantine(db: PgDatabase, engineId: string, instanceId?: string): Promise<boolean> {
  return db.transaction(async (conn) => {
    const cleared =
      instanceId !== undefined
        ? (await count(conn, SQL.clearInstanceQuarantine, [engineId, instanceId])) > 0
        : (await count(conn, SQL.clearQuarantine, [engineId])) + (await count(conn, SQL.clearInstanceQuarantines, [engineId])) > 0;
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

export async function listInstanceQuarantines(db: PgDatabase): Promise<Map<string, Map<string, QuarantineState>>> {
  return instanceQuarantines(await db.read((conn) => run<InstanceQuarantineRow>(conn, SQL.listInstanceQuarantines)));
}
