/**
 * ForgetSession delivery with two replicas on one scratch PostgreSQL database, a real sidecar
 * engine (the misbehaving test engine with `capabilities.forget`, registered at replica A; B learns
 * of it from the database), real processes and sockets.
 *
 * - Deletions through both replicas at once: each deleted session's forget is delivered at least
 *   once and acknowledged exactly once, by whichever replica leased its row (FOR UPDATE SKIP LOCKED).
 * - An engine that is down when the session is deleted: the delivery is retried with backoff, and
 *   the engine hears it once it is back (registering again wakes its pending deliveries).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { watchEngines } from "../reliability/helpers/engine-watch.js";

const ENGINE = "forgetful";
const SESSIONS = 20;

describe("ForgetSession delivery with two replicas on PostgreSQL", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];
  let clients: ContextdClient[];
  const engines: EngineProcess[] = [];

  async function startEngine(): Promise<EngineProcess> {
    const engine = await startTsEngine({ engineId: ENGINE, registry: replicas[0]!.address, owner: "acme", capabilities: ["forget"], heartbeatMs: 3_600_000 });
    engines.push(engine);
    expect(await engine.registered).toMatchObject({ ok: true });
    return engine;
  }

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(2, {
      store: db.url({ pool_max: 3 }),
      config: { slots: { context_engine: ENGINE }, forget: { poll_interval: "100ms", backoff: { initial: "100ms", max: "500ms" } } },
    });
    clients = replicas.map((r) => new ContextdClient({ address: r.address, timeoutMs: 30_000 }));
    const watchB = await watchEngines(replicas[1]!.address);
    try {
      await startEngine();
      await watchB.next(0, "REGISTERED", ENGINE);
    } finally {
      watchB.close();
    }
  });
  afterAll(async () => {
    for (const c of clients ?? []) c.close();
    for (const e of engines) await e.stop();
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  const acknowledged = (sessionId: string) =>
    replicas.flatMap((r) => r.current.logLines().filter((l) => l.msg === "engine forgot the deleted session" && l.sessionId === sessionId));

  /** Resolves once a replica logged the acknowledgement (the engine's answer reached it and it removed the row). */
  const ackedSomewhere = (sessionId: string) =>
    Promise.any(replicas.map((r) => r.current.waitForLog((l) => l.msg === "engine forgot the deleted session" && l.sessionId === sessionId, 20_000)));

  it("each deleted session's forget reaches the engine at least once and is acknowledged exactly once, across replicas", async () => {
    const engine = engines[0]!;
    const ids = Array.from({ length: SESSIONS }, (_, i) => `s-${String(i).padStart(2, "0")}`);
    for (const [i, sessionId] of ids.entries())
      await clients[i % 2]!.appendMessages({ session: { sessionId, agentId: "coder" }, messages: [user(`hello ${i}`)] });
    const answers = await Promise.all(ids.map((sessionId, i) => clients[(i + 1) % 2]!.deleteSession({ session: { sessionId } })));
    for (const a of answers) expect(a).toMatchObject({ deleted: true, forgetDeliveries: 1 });
    for (const sessionId of ids) await engine.waitForEvent((e) => e.event === "forgotten" && e.session_id === sessionId, 20_000);
    for (const sessionId of ids) await ackedSomewhere(sessionId);

    const heard = engine.events().filter((e) => e.event === "forgotten");
    for (const sessionId of ids) {
      expect(heard.filter((e) => e.session_id === sessionId).length, sessionId).toBeGreaterThanOrEqual(1);
      expect(acknowledged(sessionId).length, sessionId).toBe(1);
      // DELETED, with the deletion's time.
      expect(heard.find((e) => e.session_id === sessionId)).toMatchObject({ reason: 1 });
    }
    const byReplica = replicas.map((r) => r.current.logLines().filter((l) => l.msg === "engine forgot the deleted session").length);
    console.log(JSON.stringify({ test: "forget delivery across replicas", acknowledged_by_replica: byReplica, engine_calls: heard.length }));
    const pending = await db.client();
    try {
      expect((await pending.query("SELECT count(*)::int AS n FROM forget_deliveries")).rows[0].n).toBe(0);
    } finally {
      await pending.end();
    }
  }, 60_000);

  it("an engine that is down when the session is deleted hears the forget once it is back", async () => {
    const session = { sessionId: "while-down", agentId: "coder" };
    await clients[0]!.appendMessages({ session, messages: [user("served before the engine went down")] });
    await engines[0]!.kill9();
    expect(await clients[1]!.deleteSession({ session })).toMatchObject({ deleted: true, forgetDeliveries: 1 });
    // Tried and failed (the engine is unreachable), and still pending.
    await Promise.any(
      replicas.map((r) => r.current.waitForLog((l) => l.msg === "ForgetSession not delivered; retrying" && l.sessionId === "while-down", 20_000)),
    );
    const client = await db.client();
    try {
      expect((await client.query("SELECT count(*)::int AS n FROM forget_deliveries WHERE session_id = 'while-down'")).rows[0].n).toBe(1);
    } finally {
      await client.end();
    }

    const back = await startEngine();
    await back.waitForEvent((e) => e.event === "forgotten" && e.session_id === "while-down", 20_000);
    await ackedSomewhere("while-down");
    expect(acknowledged("while-down").length).toBe(1);
  }, 60_000);
});
