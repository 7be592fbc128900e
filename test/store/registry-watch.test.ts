import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import { openStore, type ContextdStore } from "../../src/store/open-store.js";
import type { RegistryChange } from "../../src/store/registry-store.js";
import { quarantine, registration } from "./conformance/registry.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

// RegistryStore.watchRegistry: what one replica's registry writes tell the others (the registry
// side, src/registry/registry-sync.ts, is tested with real replicas in test/replicas/registry-sync.test.ts).

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => undefined);
});

/** Collects a watch's changes; `next(pred, from)` resolves with the first matching one at index `from` or later (seen already, or to come). */
function recorder() {
  const seen: RegistryChange[] = [];
  const waiters: Array<{ pred: (c: RegistryChange) => boolean; resolve: (c: RegistryChange) => void }> = [];
  return {
    seen,
    onChange(c: RegistryChange) {
      seen.push(c);
      for (const w of [...waiters]) {
        if (!w.pred(c)) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(c);
      }
    },
    next(pred: (c: RegistryChange) => boolean, from = 0): Promise<RegistryChange> {
      const hit = seen.slice(from).find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve };
        waiters.push(w);
        setTimeout(() => reject(new Error(`no matching change within 10 s; seen ${JSON.stringify(seen)}`)), 10_000).unref();
      });
    },
  };
}

async function listeners(db: ScratchDatabase): Promise<number[]> {
  const c = await db.client();
  try {
    const { rows } = await c.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd registry listener'", [
      db.name,
    ]);
    return rows.map((r) => r.pid);
  } finally {
    await c.end();
  }
}

describe("SqliteStore.watchRegistry", () => {
  it("is not shared: one process, nothing to watch", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-watch-"));
    cleanup.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    const store = await openStore(`sqlite:${path.join(dir, "c.db")}`);
    cleanup.push(() => store.close());
    const changes: RegistryChange[] = [];
    const watch = store.watchRegistry((c) => changes.push(c));
    expect(watch).toMatchObject({ shared: false, connected: true });
    await store.claimRegistration(registration("alpha", "alice"), { refresh: true });
    await watch.close();
    expect(changes).toEqual([]);
  });
});

describe("PostgresStore.watchRegistry", () => {
  async function twoReplicas(): Promise<{ db: ScratchDatabase; a: ContextdStore; b: ContextdStore }> {
    const db = await createScratchDatabase();
    cleanup.push(() => db.drop());
    const a = await openStore(db.url());
    const b = await openStore(db.url());
    cleanup.push(
      () => a.close(),
      () => b.close(),
    );
    return { db, a, b };
  }

  it("tells every watch about each committed registry write: engine id and kind of change", async () => {
    const { a, b } = await twoReplicas();
    const rec = recorder();
    const watch = b.watchRegistry((c) => rec.onChange(c));
    expect(watch.shared).toBe(true);
    await rec.next((c) => c.kind === "resync"); // listening
    expect(watch.connected).toBe(true);
    const from = rec.seen.length;
    await a.claimRegistration(registration("alpha", "alice"), { refresh: true });
    await a.saveQuarantine("alpha", quarantine());
    await a.clearQuarantine("alpha");
    await a.clearQuarantine("alpha"); // nothing to clear: nothing changed, no notification
    await a.deleteRegistration("alpha");
    await a.deleteRegistration("alpha");
    await b.claimRegistration(registration("beta", "bob"), { refresh: true }); // its own writes too
    await rec.next((c) => c.engineId === "beta", from);
    expect(rec.seen.slice(from)).toEqual([
      { kind: "registered", engineId: "alpha" },
      { kind: "quarantined", engineId: "alpha" },
      { kind: "released", engineId: "alpha" },
      { kind: "deregistered", engineId: "alpha" },
      { kind: "registered", engineId: "beta" },
    ]);
  });

  it("reconnects a LISTEN connection that was killed, says resync, and listens again; close() ends it", async () => {
    const { db, a, b } = await twoReplicas();
    const rec = recorder();
    const connection: boolean[] = [];
    const watch = b.watchRegistry((c) => rec.onChange(c), { onConnection: (e) => connection.push(e.connected) });
    await rec.next((c) => c.kind === "resync");
    const [pid] = await listeners(db);
    expect(pid).toBeGreaterThan(0);

    const from = rec.seen.length;
    const admin = await db.client();
    cleanup.push(() => admin.end());
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    await rec.next((c) => c.kind === "resync", from);
    expect(connection).toEqual([true, false, true]);
    const now = await listeners(db);
    expect(now.length).toBe(1);
    expect(now[0]).not.toBe(pid);

    await a.saveQuarantine("gamma", quarantine());
    expect(await rec.next((c) => c.engineId === "gamma", from)).toEqual({ kind: "quarantined", engineId: "gamma" });

    await watch.close();
    expect(watch.connected).toBe(false);
    expect(await listeners(db)).toEqual([]);
  });

  it("closing the store closes its watches", async () => {
    const { db, b } = await twoReplicas();
    const rec = recorder();
    b.watchRegistry((c) => rec.onChange(c));
    await rec.next((c) => c.kind === "resync");
    expect((await listeners(db)).length).toBe(1);
    await b.close();
    expect(await listeners(db)).toEqual([]);
  });
});
