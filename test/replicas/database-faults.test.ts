/**
 * Issue 9, part 6: database faults under two replicas with a steady keyed Append/Assemble load.
 *
 * - The pool's connections are killed (pg_terminate_backend) again and again, on the shared server
 *   at 127.0.0.1:5432 (only the scratch database's own connections: the server is never restarted,
 *   other tests use it).
 * - A PostgreSQL server of the test's own (test/helpers/private-postgres.ts) is stopped — the
 *   "immediate" mode, a crash — and started again: while it is down calls fail with UNAVAILABLE and
 *   a message naming PostgreSQL and where it is, grpc.health.v1 says NOT_SERVING on every replica
 *   (the store ping, health.store_ping_interval); afterwards everything works again.
 *
 * Either way: no call that the runtime's retry policy covers (keyed appends and reads, retried on
 * UNAVAILABLE) finally fails, and every acknowledged append is in the transcript exactly once.
 * The replicas run the legacy engine only (engine routing across replicas is tested elsewhere).
 */
import { status } from "@grpc/grpc-js";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { healthCheck, healthWatch, type HealthWatch } from "../helpers/health.js";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { expectExactlyOnce, messageTexts, readEntries, runLoad, RuntimeStats, SessionWriter, waitUntil } from "../helpers/runtime-load.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { refusal } from "../helpers/registry-client.js";

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => undefined);
});
afterAll(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => undefined);
});

function loadOn(replicas: Replica[], stats: RuntimeStats, prefix: string) {
  const clients = replicas.map((r) => new ContextdClient({ address: r.address }));
  cleanup.push(async () => clients.forEach((c) => c.close()));
  // One writer per replica on its own session, and one more per replica on a shared session.
  const writers = clients.flatMap((cx, i) => [
    new SessionWriter({ client: cx, sessionId: `${prefix}-own-${i}`, writer: `o${i}`, stats, retryWindowMs: 120_000 }),
    new SessionWriter({ client: cx, sessionId: `${prefix}-shared`, writer: `s${i}`, stats, retryWindowMs: 120_000 }),
  ]);
  const stop = new AbortController();
  const done = runLoad(writers, stop.signal, 20);
  const acked = () => writers.reduce((n, w) => n + w.acked.length, 0);
  return {
    clients,
    writers,
    acked,
    async finish() {
      stop.abort();
      await done;
    },
    async verify(reader: ContextdClient) {
      for (const w of writers) {
        const entries = await readEntries(reader, w.sessionId);
        expectExactlyOnce(entries, w.acked, w.sessionId.endsWith("-shared") ? w.writer : undefined);
        expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
      }
    },
  };
}

describe("database faults under two replicas", () => {
  it("connections killed with pg_terminate_backend: no failed call, no lost or duplicate append", async () => {
    const db: ScratchDatabase = await createScratchDatabase();
    cleanup.push(() => db.drop());
    const replicas = await startReplicas(2, { store: db.url({ pool_max: 3 }), config: { health: { store_ping_interval: "250ms" } } });
    cleanup.push(() => stopReplicas(replicas));
    const admin = await db.client();
    cleanup.push(() => admin.end());

    const stats = new RuntimeStats();
    const load = loadOn(replicas, stats, "kill");
    let killed = 0;
    try {
      for (let round = 0; round < 6; round++) {
        const before = load.acked();
        await waitUntil(() => load.acked() >= before + 6, `appends are acknowledged (round ${round})`);
        const r = await admin.query<{ n: string }>(
          "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
          [db.name],
        );
        killed += Number(r.rows[0]!.n);
      }
      const before = load.acked();
      await waitUntil(() => load.acked() >= before + 6, "appends are acknowledged after the last kill");
    } finally {
      await load.finish();
    }
    console.log(JSON.stringify({ test: "pg_terminate_backend", connections_killed: killed, appends: load.acked(), load: stats.summary() }));
    expect(killed).toBeGreaterThan(0);
    expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
    for (const u of stats.unavailable) expect(u).toMatch(/PostgreSQL store at 127\.0\.0\.1:5432\/contextd_test_\w+ is unavailable/);
    await load.verify(load.clients[0]!);
    for (const r of replicas) {
      const watch = healthWatch(r.address);
      cleanup.push(async () => watch.close());
      await watch.next("SERVING");
    }
  });

  describe("a PostgreSQL server of the test's own, stopped and started again", () => {
    let server: PrivatePostgres;
    let replicas: Replica[];
    const watches: HealthWatch[] = [];

    afterAll(async () => {
      for (const w of watches) w.close();
      if (replicas) await stopReplicas(replicas);
      await server?.destroy();
    });

    it("UNAVAILABLE with a clear message and NOT_SERVING while it is down; afterwards no lost or duplicate append", async () => {
      server = await startPrivatePostgres();
      await server.createDatabase("contextd");
      const store = server.url("contextd", { pool_max: 3, connect_timeout_ms: 1000 });
      replicas = await startReplicas(2, { store, config: { health: { store_ping_interval: "250ms", store_ping_timeout: "1s" } } });
      for (const r of replicas) watches.push(healthWatch(r.address));
      for (const w of watches) await w.next("SERVING");

      const stats = new RuntimeStats();
      const load = loadOn(replicas, stats, "restart");
      const probe = new ContextdClient({ address: replicas[1]!.address, timeoutMs: 10_000 });
      cleanup.push(async () => probe.close());
      const probeAppend = {
        session: { sessionId: "restart-probe", agentId: "load" },
        messages: [textMessage(Role.ROLE_USER, "sent while the database was down")],
        idempotencyKey: "probe-1",
      };
      const measured: Record<string, unknown> = {};
      try {
        await waitUntil(() => load.writers.every((w) => w.acked.length >= 3), "every writer had 3 appends acknowledged");

        const marks = watches.map((w) => w.seen.length);
        const stoppedAt = Date.now();
        await server.stop("immediate");
        // Every replica says NOT_SERVING (its store ping failed), and logs why.
        const downIdx = await Promise.all(watches.map((w, i) => w.next("NOT_SERVING", marks[i])));
        measured.stop_to_not_serving_ms = Date.now() - stoppedAt;
        for (const r of replicas) {
          const line = await r.current.waitForLog((l) => l.msg === "store unreachable: health NOT_SERVING until a ping succeeds");
          expect(String(line.reason)).toMatch(/PostgreSQL store at 127\.0\.0\.1:\d+\/contextd is unavailable/);
        }
        for (const r of replicas) expect(await healthCheck(r.address)).toBe("NOT_SERVING");

        // Calls fail with UNAVAILABLE, naming PostgreSQL, where it is, and the cause.
        const where = new RegExp(`PostgreSQL store at 127\\.0\\.0\\.1:${server.port}/contextd is unavailable: .+`);
        const append = await refusal(probe.appendMessages(probeAppend));
        expect(append.code, append.details).toBe(status.UNAVAILABLE);
        expect(append.details).toMatch(where);
        const assemble = await refusal(probe.assemble({ session: { sessionId: "restart-own-0", agentId: "load" }, tokenBudget: 10_000 }));
        expect(assemble.code, assemble.details).toBe(status.UNAVAILABLE);
        expect(assemble.details).toMatch(where);
        const read = await refusal(probe.getTranscript({ session: { sessionId: "restart-own-0" } }));
        expect(read.code, read.details).toBe(status.UNAVAILABLE);
        measured.unavailable_message = append.details;

        // The writers are retrying (not failing) while it is down.
        const retriesBefore = stats.retries;
        await waitUntil(() => stats.retries >= retriesBefore + 4, "the writers retried during the outage");
        const ackedDuringOutage = load.acked();

        const startedAt = Date.now();
        await server.start();
        await Promise.all(watches.map((w, i) => w.next("SERVING", downIdx[i])));
        measured.start_to_serving_ms = Date.now() - startedAt;
        for (const r of replicas) await r.current.waitForLog((l) => l.msg === "store reachable again: health SERVING");
        await waitUntil(() => load.acked() >= ackedDuringOutage + 12, "appends are acknowledged after the restart");
      } finally {
        await load.finish();
      }
      measured.appends = load.acked();
      console.log(JSON.stringify({ test: "private PostgreSQL restart", ...measured, load: stats.summary() }));

      expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
      expect(stats.unavailableCount).toBeGreaterThan(0);
      for (const u of stats.unavailable) expect(u).toMatch(/PostgreSQL store at 127\.0\.0\.1:\d+\/contextd is unavailable/);
      await load.verify(load.clients[0]!);

      // The append refused during the outage, retried now with its key: written once.
      const retried = await probe.appendMessages(probeAppend);
      expect(retried.entryIds).toHaveLength(1);
      expect(messageTexts(await readEntries(load.clients[0]!, "restart-probe"))).toEqual(["sent while the database was down"]);
      for (const r of replicas) expect(await healthCheck(r.address)).toBe("SERVING");
    });
  });
});
