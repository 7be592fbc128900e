import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";

import { FailedPreconditionError, UnavailableError } from "../../src/contract/errors.js";
import { CompactionEntry, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { openStore } from "../../src/store/open-store.js";
import { MIGRATIONS, SCHEMA_VERSION } from "../../src/store/postgres/migrations.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SQL } from "../../src/store/postgres/statements.js";
import { searchPage } from "../../src/store/search-hits.js";
import { parseQuery } from "../../src/store/search-text.js";
import { eventually } from "../helpers/registry-client.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

// PostgreSQL only: migrations under concurrent starts, connection failures, the pool. What every
// store does is in conformance/ (postgres-conformance.test.ts). Each test has its own database.

const LABELS = { sessionKey: "k", agentId: "a" };
const cleanup: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function scratch(): Promise<ScratchDatabase> {
  const db = await createScratchDatabase();
  cleanup.push(() => db.drop());
  return db;
}

async function open(url: string): Promise<PostgresStore> {
  const s = await PostgresStore.open(url);
  cleanup.push(() => s.close());
  return s;
}

async function sql<R extends pg.QueryResultRow>(db: ScratchDatabase, text: string, values: unknown[] = []): Promise<R[]> {
  const c = await db.client();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}

/** Connections the stores (application_name contextd) hold on `db`. */
async function storeConnections(db: ScratchDatabase): Promise<number> {
  const [row] = await sql<{ n: number }>(db, "SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd'", [db.name]);
  return row.n;
}

describe("PostgresStore: schema migrations", () => {
  it("migrates a fresh database exactly once when several replicas start at once", async () => {
    const db = await scratch();
    const stores = await Promise.all(Array.from({ length: 5 }, () => open(db.url({ pool_max: 2 }))));
    const applied = stores.map((s) => s.migration.applied);
    expect(applied.filter((a) => a.length > 0)).toEqual([MIGRATIONS.map((m) => m.version)]);
    expect(stores.filter((s) => s.migration.found === 0 && s.migration.applied.length === 0).length).toBe(0);
    const rows = await sql<{ version: number }>(db, "SELECT version FROM contextd_schema_migrations ORDER BY version");
    expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    // Every replica works on the one schema.
    await stores[0].appendMessages("s", [{ message: textMessage(Role.ROLE_USER, "hi"), tokenCount: 1 }], LABELS);
    for (const s of stores) expect((await s.getSession("s"))?.messageCount).toBe(1);
    // A later start finds nothing to do.
    expect((await open(db.url())).migration).toEqual({ found: SCHEMA_VERSION, applied: [] });
  });

  it("migration 7 indexes every entry of an existing database, so its history is searchable once it opens", async () => {
    const db = await scratch();
    const before = await open(db.url());
    await before.appendMessages("old", [{ message: textMessage(Role.ROLE_USER, "see invoice_rounding.ts for BILL-4821"), tokenCount: 1 }], LABELS);
    await before.appendMessages("old", [{ message: textMessage(Role.ROLE_USER, "nothing here"), tokenCount: 1 }], LABELS);
    await before.close();
    // Back to version 6: no search column, no index, no record of migration 7 (nor of the later ones, undone too).
    await sql(db, "ALTER TABLE entries DROP COLUMN search");
    for (const undo of [
      "DROP TABLE session_engines, forget_deliveries, leases",
      "DROP INDEX sessions_by_parent, sessions_by_created",
      "DROP TABLE audit_events, config_reservations",
      "DROP TRIGGER entries_stored_bytes ON entries",
      "DROP TRIGGER revisions_stored_bytes ON entry_revisions",
      "DROP FUNCTION contextd_stored_bytes()",
      "DROP INDEX sessions_by_agent",
      "ALTER TABLE sessions DROP COLUMN stored_bytes",
    ])
      await sql(db, undo);
    await sql(db, "DELETE FROM contextd_schema_migrations WHERE version >= 7");

    const after = await open(db.url());
    expect(after.migration).toEqual({ found: 6, applied: MIGRATIONS.map((m) => m.version).filter((v) => v >= 7) });
    const hits = await searchPage(after, { sessionId: "old", terms: parseQuery("invoice_rounding.ts") }, "newest", 10, undefined);
    expect(hits.hits.map((h) => h.seq)).toEqual([1]);
    const [unindexed] = await sql<{ n: number }>(db, "SELECT COUNT(*)::int AS n FROM entries WHERE search IS NULL");
    expect(unindexed.n).toBe(0);
    const [index] = await sql<{ n: number }>(db, "SELECT COUNT(*)::int AS n FROM pg_indexes WHERE indexname = 'entries_search'");
    expect(index.n).toBe(1);
  });

  it("refuses a database whose schema is newer than this build, with a clear message", async () => {
    const db = await scratch();
    await (await open(db.url())).close();
    await sql(db, "INSERT INTO contextd_schema_migrations (version, description) VALUES ($1, 'from the future')", [SCHEMA_VERSION + 1]);
    const err = await PostgresStore.open(db.url()).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(FailedPreconditionError);
    expect((err as Error).message).toBe(
      `PostgreSQL store at 127.0.0.1:5432/${db.name} has schema version ${SCHEMA_VERSION + 1}, newer than this contextd supports (${SCHEMA_VERSION}); ` +
        "upgrade contextd or point it at another database",
    );
    expect(await storeConnections(db)).toBe(0); // the refused store closed its pool
  });

  it("opens through openStore for postgres:// and postgresql:// URLs; a database that does not exist is a precondition", async () => {
    const db = await scratch();
    const s = await openStore(db.url().replace(/^postgres:/, "postgresql:"));
    cleanup.push(() => s.close());
    expect(s.kind).toBe("postgres");
    await s.ping();
    const missing = await openStore(db.url().replace(db.name, `${db.name}_missing`)).catch((x: unknown) => x);
    expect(missing).toBeInstanceOf(FailedPreconditionError);
    expect((missing as Error).message).toMatch(/cannot be opened: database ".*_missing" does not exist/);
  });
});

describe("PostgresStore: connection failures are UNAVAILABLE", () => {
  it("a refused connection (wrong port) names PostgreSQL and the cause", async () => {
    const err = await PostgresStore.open("postgres://postgres:pw@127.0.0.1:1/contextd").catch((x: unknown) => x);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(/^PostgreSQL store at 127\.0\.0\.1:1\/contextd is unavailable: .*ECONNREFUSED/);
    expect((err as Error).message).not.toContain("pw");
  });

  it("a pool whose every connection is busy past connect_timeout_ms is unavailable, and recovers", async () => {
    const db = await scratch();
    const store = await open(db.url({ pool_max: 1, connect_timeout_ms: 300 }));
    const writer = await store.beginRawWrite(); // holds the only connection
    const err = await store.getSession("s").catch((x: unknown) => x);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(/unavailable: timeout exceeded when trying to connect/);
    await writer.rollback();
    expect(await store.getSession("s")).toBeUndefined();
  });

  it("a connection killed in the middle of a transaction fails that transaction with UNAVAILABLE; the pool replaces it", async () => {
    const db = await scratch();
    const store = await open(db.url({ pool_max: 2 }));
    const writer = await store.beginRawWrite();
    const [{ pid }] = await sql<{ pid: number }>(db, "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'", [db.name]);
    await sql(db, "SELECT pg_terminate_backend($1)", [pid]);
    const err = await writer
      .writeRegistry({ registrations: [], instances: [], quarantines: [{ engineId: "x", payload: new Uint8Array(), updatedAtMs: 1 }], instanceQuarantines: [] })
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(/PostgreSQL store at .* is unavailable: .*(terminat|Connection)/i);
    expect((await store.countRows()).quarantines).toBe(0);
    await store.ping();
  });

  it("pg_terminate_backend of every idle connection: the next calls run on fresh connections", async () => {
    const db = await scratch();
    const store = await open(db.url({ pool_max: 4 }));
    await Promise.all(["a", "b", "c", "d"].map((s) => store.appendMessages(s, [{ message: textMessage(Role.ROLE_USER, s), tokenCount: 1 }], LABELS)));
    const killed = await sql<{ ok: boolean }>(
      db,
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd'",
      [db.name],
    );
    expect(killed.length).toBeGreaterThan(0);
    // Reads retry on a fresh connection; a write that had not committed runs again.
    expect((await store.getSession("a"))?.messageCount).toBe(1);
    await store.appendMessages("a", [{ message: textMessage(Role.ROLE_USER, "again"), tokenCount: 1 }], LABELS);
    expect((await store.readEntries("a", 0, 10)).length).toBe(2);
  });
});

describe("PostgresStore: the pool", () => {
  it("holds at most pool_max connections, and close() ends them all", async () => {
    const db = await scratch();
    const store = await PostgresStore.open(db.url({ pool_max: 2 }));
    await store.appendMessages("s", [], LABELS);
    await Promise.all(Array.from({ length: 12 }, () => store.readActiveView("s")));
    expect(await storeConnections(db)).toBeLessThanOrEqual(2);
    await store.close();
    await store.close(); // idempotent
    // The server reaps a closed connection's backend a moment after the socket closes.
    await eventually(async () => (await storeConnections(db)) === 0, 10_000, 50);
    const err = await store.getSession("s").catch((x: unknown) => x);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toBe(`PostgreSQL store at 127.0.0.1:5432/${db.name} is closed`);
  });

  it("reads the active view by index, not by scanning history", async () => {
    const db = await scratch();
    const store = await open(db.url());
    const batch = Array.from({ length: 1000 }, (_, i) => ({ message: textMessage(Role.ROLE_USER, `m${i}`), tokenCount: 1 }));
    for (const s of ["a", "b", "c"]) for (let i = 0; i < 3; i++) await store.appendMessages(s, batch, LABELS);
    await sql(db, "ANALYZE");
    const plan = await sql<{ "QUERY PLAN": string }>(
      db,
      `EXPLAIN SELECT seq, token_count, payload FROM entries
       WHERE session_id = 'b' AND seq >= 2990 AND kind = 'message' AND NOT hidden ORDER BY seq`,
    );
    const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
    expect(text).toMatch(/Index Scan using entries_pkey on entries/);
    expect(text).not.toMatch(/Seq Scan/);
  });

  it("reads the pinned system messages before the cut through the partial index entries_pinned", async () => {
    const db = await scratch();
    const store = await open(db.url());
    const rules = { message: textMessage(Role.ROLE_SYSTEM, "rules"), tokenCount: 2 };
    const batch = Array.from({ length: 1000 }, (_, i) => ({ message: textMessage(Role.ROLE_USER, `m${i}`), tokenCount: 1 }));
    let last = "";
    for (const s of ["a", "b", "c"]) {
      for (let i = 0; i < 3; i++) last = (await store.appendMessages(s, [rules, ...batch], LABELS)).at(-3)!.id;
      await store.commitCompaction(s, CompactionEntry.fromPartial({ summary: "s", firstKeptEntryId: last }), "", 1);
    }
    await sql(db, "ANALYZE");
    const view = (await store.readActiveView("b"))!;
    expect(view.pinnedCount).toBe(3);
    expect(view.messages.length).toBe(3 + 3);
    // The statements the store runs, as named: the planner picks the partial index for the pinned part.
    for (const name of ["activeView", "activeTotals"] as const) {
      // $2, $3: the agent scope of every session (no exact ids, the prefix "").
      const statement = SQL[name].text.replaceAll("$1", "'b'").replaceAll("$2", "'{}'").replaceAll("$3", `'{""}'`);
      const plan = await sql<{ "QUERY PLAN": string }>(db, `EXPLAIN ${statement}`);
      const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
      expect(text, name).toMatch(/Index (Only )?Scan using entries_pinned on entries/);
      expect(text, name).not.toMatch(/Seq Scan on entries/);
    }
  });
});
