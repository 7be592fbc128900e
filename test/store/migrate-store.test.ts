import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import { openStore, type ContextdStore } from "../../src/store/open-store.js";
import { msg, LABELS } from "./conformance/harness.js";
import { fillStore, MULTI, MULTI_INSTANCES, rawRegistry, registryReads, snapshot } from "./conformance/store-copy.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

/** contextctl, built (`npm run build`), run as a child process. */
const CONTEXTCTL = resolve(import.meta.dirname, "../../bin/contextctl.js");

function contextctl(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CONTEXTCTL, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let [stdout, stderr] = ["", ""];
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

const cleanup: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function sqliteSource(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "contextd-migrate-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite:${join(dir, "contextd.db")}`;
  const store = await openStore(url);
  try {
    await fillStore(store);
  } finally {
    await store.close();
  }
  return url;
}

async function scratch(): Promise<ScratchDatabase> {
  const db = await createScratchDatabase();
  cleanup.push(() => db.drop());
  return db;
}

async function opened(url: string): Promise<ContextdStore> {
  const s = await openStore(url);
  cleanup.push(() => s.close());
  return s;
}

describe("contextctl migrate-store FROM TO", () => {
  it("copies a SQLite store (imported OpenClaw sessions, compactions, rewrites, keys, registry) into PostgreSQL", async () => {
    const from = await sqliteSource();
    const db = await scratch();
    const to = db.url();

    const run = await contextctl("migrate-store", from, to, "--json");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({
      ok: true,
      from,
      to,
      sessions: 5,
      entryRevisions: 2,
      idempotencyKeys: 2,
      registrations: 3,
      instances: 5,
      quarantines: 2,
      instanceQuarantines: 2,
    });

    const source = await opened(from);
    const target = await opened(to);
    expect(target.kind).toBe("postgres");
    expect(out.entries).toBe((await source.countRows()).entries);
    // Every read answers the same: getSession, readEntries, readActiveView, totals, revisions, keys, registry.
    expect(await snapshot(target)).toEqual(await snapshot(source));

    // The runtime's retry of a request the SQLite contextd answered is replayed by PostgreSQL.
    const first = (await source.readEntries("keyed", 0, 1))[0];
    expect(await target.appendIdempotent("keyed", [msg("once", 2)], LABELS, { key: "k1", requestHash: "h1" })).toEqual({
      replayed: true,
      entryIds: [first.id],
      tokenCounts: [2],
    });

    // A second run refuses the now non-empty target and changes nothing.
    const again = await contextctl("migrate-store", from, to);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe("");
    expect(again.stderr).toMatch(
      /^contextctl: migrate-store: PostgreSQL store at 127\.0\.0\.1:5432\/contextd_test_\w+ is not empty \(5 sessions, \d+ entries, 2 entryRevisions, 2 idempotencyKeys, 3 registrations, 5 instances, 2 quarantines, 2 instanceQuarantines\); copy into an empty database\n$/,
    );
    expect((await target.countRows()).sessions).toBe(5);

    // And back: PostgreSQL into a new SQLite file gives the same store again.
    const back = `sqlite:${join(mkdtempSync(join(tmpdir(), "contextd-migrate-back-")), "contextd.db")}`;
    cleanup.push(() => rmSync(back.slice("sqlite:".length, -"/contextd.db".length), { recursive: true, force: true }));
    const before = await snapshot(target);
    await target.close();
    const reverse = await contextctl("migrate-store", to, back, "--json");
    expect(reverse.code).toBe(0);
    expect(await snapshot(await opened(back))).toEqual(before);
  });

  it("keeps a multi-instance engine's instances (locality included) and its quarantines (automatic, an isolated instance, the isolated engine) SQLite → PostgreSQL → SQLite", async () => {
    const from = await sqliteSource();
    const source = await opened(from);
    const expected = await registryReads(source);
    const expectedRaw = await rawRegistry(source);
    // The source holds what the test is about: three instances at three localities, two instance records, the engine's own.
    const multi = (await source.listRegistrations()).filter((r) => r.engineId === MULTI);
    expect(multi.map((r) => r.instanceId)).toEqual(MULTI_INSTANCES);
    expect(new Set(multi.map((r) => JSON.stringify(r.locality))).size).toBe(3);
    expect([...((await source.listInstanceQuarantines()).get(MULTI) ?? new Map()).entries()].map(([id, q]) => [id, q.manual])).toEqual([
      ["gamma-b", false],
      ["gamma-c", true],
    ]);
    expect((await source.listQuarantines()).get(MULTI)?.manual).toBe(true);
    await source.close();

    const db = await scratch();
    const run = await contextctl("migrate-store", from, db.url(), "--json");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, registrations: 3, instances: 5, quarantines: 2, instanceQuarantines: 2 });
    const pg = await opened(db.url());
    expect(await registryReads(pg)).toEqual(expected);
    expect(await rawRegistry(pg)).toEqual(expectedRaw);
    await pg.close();

    const back = `sqlite:${join(mkdtempSync(join(tmpdir(), "contextd-migrate-back-")), "contextd.db")}`;
    cleanup.push(() => rmSync(back.slice("sqlite:".length, -"/contextd.db".length), { recursive: true, force: true }));
    const reverse = await contextctl("migrate-store", db.url(), back, "--json");
    expect(reverse.code).toBe(0);
    expect(JSON.parse(reverse.stdout)).toMatchObject({ ok: true, registrations: 3, instances: 5, quarantines: 2, instanceQuarantines: 2 });
    const sqlite = await opened(back);
    expect(await registryReads(sqlite)).toEqual(expected);
    expect(await rawRegistry(sqlite)).toEqual(expectedRaw);
  });

  it("prints a summary without --json, and fails with exit 1 for a missing source or an unreachable target", async () => {
    const from = await sqliteSource();
    const db = await scratch();
    const ok = await contextctl("migrate-store", from, db.url());
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(
      /^copied 5 sessions \(\d+ entries, 2 revisions, 2 idempotency keys\), 3 engine registrations \(5 instances\) and 4 quarantine records \(2 engine-wide, 2 of instances\) from sqlite:.* to postgres:.* in \d+\.\d s\n$/,
    );

    const missing = await contextctl("migrate-store", "sqlite:/nonexistent/dir/contextd.db", db.url(), "--json");
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({
      ok: false,
      error: "source sqlite:/nonexistent/dir/contextd.db: /nonexistent/dir/contextd.db does not exist",
    });

    const down = await contextctl("migrate-store", from, "postgres://postgres:hunter2@127.0.0.1:1/contextd");
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^contextctl: migrate-store: PostgreSQL store at 127\.0\.0\.1:1\/contextd is unavailable: .*ECONNREFUSED/);
    expect(down.stderr).not.toContain("hunter2");

    const same = await contextctl("migrate-store", from, from);
    expect(same.code).toBe(1);
    expect(same.stderr).toContain("FROM and TO are the same store");
  });
});
