/**
 * Issue 9, part 5: three contextd replicas on one PostgreSQL database behind a real L7 gRPC load
 * balancer — Debian's HAProxy running docs/deploy/haproxy.cfg, the documented example, unchanged
 * (only the addresses come from the environment) — under a steady Append/Assemble load while the
 * replicas are restarted one at a time (SIGTERM, drain, start again on the same port).
 *
 * The runtime's retry policy (test/helpers/runtime-load.ts): UNAVAILABLE is retried only for keyed
 * appends and reads, and every call that finally failed is counted. What must hold: zero failed
 * calls, every acknowledged append in the transcript exactly once (no loss, no duplicate), in order.
 *
 * The replicas run the built-in legacy engine only: engine routing and registry state across
 * replicas are covered by the registry's own tests.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { HAPROXY_CONFIG, startHaproxy, type Haproxy } from "../helpers/haproxy.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { expectExactlyOnce, readEntries, runLoad, RuntimeStats, SessionWriter, waitUntil } from "../helpers/runtime-load.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { healthCheck } from "../helpers/health.js";

/** What the replicas need behind this HAProxy config (its comments say why). */
const REPLICA_CONFIG = { health: { drain_delay: "2s", shutdown_grace: "10s" } };

/**
 * The health check's bytes, built here from the protocols (RFC 9113 framing, RFC 7541 HPACK
 * literals without Huffman coding, the gRPC message framing) to compare with the config's hex.
 */
function grpcHealthCheckBytes(): Buffer {
  const literal = (nameIndex: number, value: string) => {
    // "Literal Header Field without Indexing — Indexed Name": 0000 + 4-bit index (15 + more when larger).
    const head = nameIndex < 15 ? [nameIndex] : [0x0f, nameIndex - 15];
    return Buffer.concat([Buffer.from(head), Buffer.from([value.length]), Buffer.from(value)]);
  };
  const newName = (name: string, value: string) =>
    Buffer.concat([Buffer.from([0x00, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)]);
  const headers = Buffer.concat([
    Buffer.from([0x83, 0x86]), // :method POST (static 3), :scheme http (static 6)
    literal(4, "/grpc.health.v1.Health/Check"), // :path
    literal(1, "contextd"), // :authority
    literal(31, "application/grpc"), // content-type
    newName("te", "trailers"),
  ]);
  const frame = (type: number, flags: number, stream: number, payload: Buffer) => {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.length, 0, 3);
    h[3] = type;
    h[4] = flags;
    h.writeUInt32BE(stream, 5);
    return Buffer.concat([h, payload]);
  };
  return Buffer.concat([
    Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    frame(0x4, 0, 0, Buffer.alloc(0)), // SETTINGS
    frame(0x1, 0x4, 1, headers), // HEADERS, END_HEADERS
    frame(0x0, 0x1, 1, Buffer.alloc(5)), // DATA, END_STREAM: an empty HealthCheckRequest
  ]);
}

describe("HAProxy in front of three replicas (docs/deploy/haproxy.cfg)", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];
  let lb: Haproxy;

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(3, { store: db.url({ pool_max: 4 }), config: REPLICA_CONFIG });
    lb = await startHaproxy(replicas.map((r) => r.address));
    // Through the proxy, a real gRPC call.
    expect(await healthCheck(lb.address)).toBe("SERVING");
  });
  afterAll(async () => {
    await lb?.stop();
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  it("the config's health check is grpc.health.v1 Check over HTTP/2, expecting SERVING", () => {
    const cfg = fs.readFileSync(HAPROXY_CONFIG, "utf8");
    const send = /^\s*tcp-check send-binary ([0-9a-f]+)\s*$/m.exec(cfg)?.[1];
    expect(send, "tcp-check send-binary <hex>").toBeDefined();
    expect(send).toBe(grpcHealthCheckBytes().toString("hex"));
    // HealthCheckResponse{status: SERVING} in a gRPC frame: 00 00000002 0801.
    expect(cfg).toMatch(/^\s*tcp-check expect binary 00000000020801\s*$/m);
    // Only connection failures are resent by HAProxy (nothing reached a replica).
    expect(cfg).toMatch(/^\s*retry-on conn-failure\s*$/m);
  });

  it("rolling restarts under a steady Append/Assemble load: zero failed calls, no lost or duplicate append", async () => {
    const stats = new RuntimeStats();
    // One channel through the proxy, as a runtime would have; HAProxy balances each call.
    const cx = new ContextdClient({ address: lb.address });
    const writers = [
      new SessionWriter({ client: cx, sessionId: "lb-a", writer: "wa", stats }),
      new SessionWriter({ client: cx, sessionId: "lb-b", writer: "wb", stats }),
      // Two writers on one session: each one's order must hold in the shared history.
      new SessionWriter({ client: cx, sessionId: "lb-shared", writer: "wc", stats }),
      new SessionWriter({ client: cx, sessionId: "lb-shared", writer: "wd", stats }),
    ];
    const acked = () => writers.reduce((n, w) => n + w.acked.length, 0);
    const stop = new AbortController();
    const load = runLoad(writers, stop.signal, 20);
    const measured: Array<Record<string, unknown>> = [];
    try {
      await waitUntil(() => writers.every((w) => w.acked.length >= 3), "every writer had 3 appends acknowledged");
      for (const replica of replicas) {
        const from = lb.events().length;
        const before = acked();
        const sigterm = Date.now();
        const stopped = await replica.stop();
        expect(stopped.exitCode, `${replica.name} exits 0 after draining`).toBe(0);
        const msgs = stopped.logLines.map((l) => l.msg);
        expect(msgs).toContain("contextd draining: health NOT_SERVING");
        expect(msgs).toContain("contextd stopped taking new calls; waiting for the calls in flight");
        expect(msgs).toContain("contextd stopped taking calls; the calls in flight finished");
        expect(msgs).not.toContain("health.shutdown_grace expired: calls still in flight were cancelled");
        const down = await lb.waitForServer(replica.name, "DOWN", from, 30_000);
        const duringStop = acked() - before;
        await replica.start();
        const up = await lb.waitForServer(replica.name, "UP", down.index + 1, 60_000);
        // The load went on while the replica was away, and goes on after it is back.
        const afterUp = acked();
        await waitUntil(() => acked() >= afterUp + 8, `appends are acknowledged after ${replica.name} is back`);
        measured.push({
          replica: replica.name,
          sigterm_to_exit_ms: stopped.ms,
          sigterm_to_haproxy_down_ms: down.atMs - sigterm,
          haproxy_down_before_exit: down.atMs - sigterm < stopped.ms,
          down_to_up_ms: up.atMs - down.atMs,
          appends_acked_while_stopping: duringStop,
        });
      }
    } finally {
      stop.abort();
      await load.catch((err: unknown) => {
        throw new Error(`the load failed: ${String(err)}; ${JSON.stringify(stats.summary())}`);
      });
    }
    const replayed = writers.reduce((n, w) => n + w.acked.filter((a) => a.replayed).length, 0);
    console.log(
      JSON.stringify({
        test: "haproxy rolling restart",
        restarts: measured,
        load: stats.summary(),
        assembles: writers.reduce((n, w) => n + w.assembles, 0),
        appends: acked(),
        replayed_appends: replayed,
      }),
    );

    expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
    // Read back directly from one replica (not through the proxy).
    const direct = new ContextdClient({ address: replicas[0]!.address });
    try {
      expectExactlyOnce(await readEntries(direct, "lb-a"), writers[0]!.acked);
      expectExactlyOnce(await readEntries(direct, "lb-b"), writers[1]!.acked);
      const shared = await readEntries(direct, "lb-shared");
      expectExactlyOnce(shared, writers[2]!.acked, "wc");
      expectExactlyOnce(shared, writers[3]!.acked, "wd");
      expect(shared.map((e) => e.seq)).toEqual(shared.map((_, i) => i + 1));
    } finally {
      direct.close();
      cx.close();
    }
  });
  it("a replica killed (SIGKILL) under load: the runtime's keyed retries leave no failed call and no duplicate", async () => {
    const stats = new RuntimeStats();
    const cx = new ContextdClient({ address: lb.address });
    const writers = ["ka", "kb", "kc"].map((w) => new SessionWriter({ client: cx, sessionId: `kill-${w}`, writer: w, stats }));
    const acked = () => writers.reduce((n, w) => n + w.acked.length, 0);
    const stop = new AbortController();
    const load = runLoad(writers, stop.signal, 5);
    const victim = replicas[1]!;
    try {
      await waitUntil(() => writers.every((w) => w.acked.length >= 3), "every writer had 3 appends acknowledged");
      const from = lb.events().length;
      // No drain: calls in flight at the victim are cut off (HAProxy answers them with an error).
      await victim.current.kill9();
      const down = await lb.waitForServer(victim.name, "DOWN", from, 30_000);
      await victim.start();
      await lb.waitForServer(victim.name, "UP", down.index + 1, 60_000);
      const afterUp = acked();
      await waitUntil(() => acked() >= afterUp + 6, "appends are acknowledged after the restart");
    } finally {
      stop.abort();
      await load.catch((err: unknown) => {
        throw new Error(`the load failed: ${String(err)}; ${JSON.stringify(stats.summary())}`);
      });
    }
    const replayed = writers.reduce((n, w) => n + w.acked.filter((a) => a.replayed).length, 0);
    console.log(JSON.stringify({ test: "haproxy SIGKILL", load: stats.summary(), appends: acked(), replayed_appends: replayed }));
    expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
    const direct = new ContextdClient({ address: replicas[0]!.address });
    try {
      for (const w of writers) expectExactlyOnce(await readEntries(direct, w.sessionId), w.acked);
    } finally {
      direct.close();
      cx.close();
    }
  });
});
