/**
 * Issue 9, part 2: registry state shared across replicas. Real contextd processes on one scratch
 * PostgreSQL database and a real sidecar engine (the TypeScript test engine, built on the engine
 * SDK), which registers at replica A only:
 *
 * - the engine registered at A serves sessions that arrive at B;
 * - an operator's isolation at A reaches B within a second (LISTEN/NOTIFY): B answers from legacy
 *   with the quarantine reason; a clear at B lets A route to the engine again;
 * - host tokens: the engine is told to call back the replica that called it (HostContext.endpoint
 *   is that replica's own host_endpoint), and a token issued by B presented at A is refused with a
 *   status that says where it belongs;
 * - a replica started later knows all of it;
 * - a missed notification is repaired: a record written without NOTIFY is applied by the periodic
 *   reconcile, and a change made while the LISTEN connections were killed (pg_terminate_backend)
 *   arrives once they reconnect;
 * - a deregistration at B makes A (and C) forget the engine;
 * - two owners registering one new id at A and at B at the same moment: exactly one owns it (the
 *   database's conditional write decides), the other is refused OWNED_BY_OTHER naming the winner.
 *
 * A and B reconcile every 30 s only, so what they apply within the test's time came by
 * notification; C, started later, reconciles every 500 ms (and shows the reconcile at work).
 * Every wait is for an event (WatchEngines, a log line, the engine's own stdout), never a sleep.
 */
import { status } from "@grpc/grpc-js";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth, QuarantineState, Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { hostClient, refusal, registryClient } from "../helpers/registry-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { watchEngines, type EngineWatch } from "../reliability/helpers/engine-watch.js";

const ENGINE = "shared-engine";
const config = (reconcile: string) => ({
  slots: { context_engine: ENGINE },
  engines: { reconcile_interval: reconcile, health: { interval: "1s", timeout: "500ms" } },
});
const refusalName = (r: Refusal) => Refusal[r];
const LISTENERS = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd registry listener'";

describe("registry state shared by replicas on one PostgreSQL database", () => {
  let db: ScratchDatabase;
  let admin: pg.Client;
  let replicas: Replica[] = [];
  let engine: EngineProcess;
  /** r1 (A), r2 (B), and r3 (C, started later). */
  const byName = new Map<string, Replica>();
  const watches = new Map<string, EngineWatch>();
  const clients = new Map<string, ContextdClient>();
  const registries = new Map<string, ReturnType<typeof registryClient>>();
  const messages = codingSession({ turns: 6, seed: 9 }).messages;

  const named = (name: string) => byName.get(name)!;
  const cx = (name: string) => clients.get(name)!;
  const reg = (name: string) => registries.get(name)!;
  const watch = (name: string) => watches.get(name)!;
  async function connect(name: string, r: Replica): Promise<void> {
    byName.set(name, r);
    clients.set(name, new ContextdClient({ address: r.address, timeoutMs: 30_000 }));
    registries.set(name, registryClient(r.address));
    watches.set(name, await watchEngines(r.address));
  }
  /** The first log line of replica `name` about ENGINE with message `msg` after line `from`. */
  function logOf(name: string, msg: string, from = 0) {
    let seen = 0;
    return named(name).current.waitForLog((l) => l.msg === msg && l.engineId === ENGINE && seen++ >= from, 5_000);
  }
  const count = (name: string, msg: string) =>
    named(name)
      .current.logLines()
      .filter((l) => l.msg === msg && l.engineId === ENGINE).length;
  const assemble = (name: string, sessionId: string) => cx(name).assemble({ session: { sessionId }, tokenBudget: 200_000 });

  beforeAll(async () => {
    db = await createScratchDatabase();
    admin = await db.client();
    replicas = await startReplicas(2, { store: db.url({ pool_max: 3 }), config: config("30s") });
    await connect("r1", replicas[0]!);
    await connect("r2", replicas[1]!);
  });
  afterAll(async () => {
    await engine?.stop();
    for (const w of watches.values()) w.close();
    for (const c of clients.values()) c.close();
    for (const r of registries.values()) r.close();
    await stopReplicas([...new Set([...replicas, ...byName.values()])]);
    await admin?.end();
    await db?.drop();
  });

  it("an engine registered at A serves sessions that arrive at B", async () => {
    const markB = watch("r2").mark();
    engine = await startTsEngine({ engineId: ENGINE, registry: named("r1").address, owner: "acme", heartbeatMs: 3_600_000 });
    expect(await engine.registered).toMatchObject({ ok: true });
    const registered = await watch("r2").next(markB, "REGISTERED", ENGINE);
    expect(registered.message).toBe("registered at another replica");
    expect(registered.engine?.endpoint).toBe(engine.address);
    expect((await logOf("r2", "engine registered at another replica")).via).toBe("notification");
    // B judges the engine's health itself, at once.
    const checked = await watch("r2").next(markB, "HEALTH_CHANGED", ENGINE);
    expect(checked.engine?.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);

    await cx("r2").appendMessages({ session: { sessionId: "at-b" }, messages });
    const calls = engine.events().length;
    const answer = await assemble("r2", "at-b");
    expect(answer).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    await engine.waitForEvent((e, i) => i >= calls && e.event === "call" && e.op === "assemble");
  });

  it("isolated at A: within a second B answers from legacy with the quarantine reason; cleared at B: A routes to the engine again", async () => {
    const markB = watch("r2").mark();
    const started = Date.now();
    await reg("r1").isolate(ENGINE, "maintenance window 42");
    const quarantined = await watch("r2").next(markB, "QUARANTINED", ENGINE);
    const answer = await assemble("r2", "at-b");
    const elapsed = Date.now() - started;
    expect(answer).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(answer.fallbackReason).toContain("maintenance window 42");
    expect(quarantined.engine?.quarantine).toMatchObject({ manual: true, reason: "maintenance window 42" });
    expect(elapsed, "isolate at A → B answers from legacy").toBeLessThan(1_000);
    expect((await logOf("r2", "engine quarantined at another replica")).via).toBe("notification");
    console.log(JSON.stringify({ test: "quarantine reaches the other replica", ms: elapsed }));

    // B's own health checks pass, but a manual quarantine holds until cleared — at any replica.
    const markA = watch("r1").mark();
    const clearedAt = Date.now();
    await reg("r2").clear(ENGINE);
    await watch("r1").next(markA, "RELEASED", ENGINE);
    await cx("r1").appendMessages({ session: { sessionId: "at-a" }, messages });
    expect(await assemble("r1", "at-a")).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    expect(Date.now() - clearedAt, "clear at B → A routes to the engine").toBeLessThan(1_000);
    expect((await reg("r1").get(ENGINE)).quarantine).toBeUndefined();
    expect((await reg("r2").get(ENGINE)).quarantine).toBeUndefined();
  });

  it("host tokens: the engine calls back the replica that called it; B's token presented at A gets a clear UNAUTHENTICATED", async () => {
    const leak = path.join(mkdtempSync(path.join(tmpdir(), "contextd-leak-")), "host.json");
    const readLeak = () => JSON.parse(readFileSync(leak, "utf8")) as { op: string; endpoint: string; token: string; session_id: string };

    // An Assemble at B that stays in flight: its token lives while it runs.
    engine.control({ assemble: "slow", slow_ms: 3_000, leak_host_token_to: leak });
    const calls = engine.events().length;
    const inFlight = assemble("r2", "at-b");
    await engine.waitForEvent((e, i) => i >= calls && e.event === "call" && e.op === "assemble");
    const fromB = readLeak();
    expect(fromB).toMatchObject({ op: "assemble", endpoint: named("r2").address, session_id: "at-b" });
    const hostA = hostClient(named("r1").address);
    const hostB = hostClient(named("r2").address);
    try {
      const elsewhere = await refusal(hostA.readTranscript({ session: { sessionId: "at-b" } }, fromB.token));
      expect(elsewhere.code).toBe(status.UNAUTHENTICATED);
      expect(elsewhere.details).toContain(`issued by the contextd replica at ${named("r2").address}`);
      expect(elsewhere.details).toContain("valid only at the HostContext.endpoint of the engine call that carried it");
      // At the replica that issued it, the same token works (while its call runs).
      expect((await hostB.readTranscript({ session: { sessionId: "at-b" } }, fromB.token)).entries.length).toBeGreaterThan(0);
    } finally {
      hostA.close();
      hostB.close();
    }
    expect((await inFlight).engineId).toBe(ENGINE);

    // A Compact at A: the engine delegates compaction to the host at HostContext.endpoint — A.
    engine.control({ leak_host_token_to: leak });
    const compacted = await cx("r1").compact({ session: { sessionId: "at-a" }, tokenBudget: 16_000, force: true });
    expect(compacted).toMatchObject({ ok: true, compacted: true, engineId: ENGINE, mode: Mode.MODE_NORMAL });
    expect(readLeak()).toMatchObject({ op: "compact", endpoint: named("r1").address, session_id: "at-a" });
    engine.control({});
  });

  it("a replica started later knows the registration and the quarantine", async () => {
    const markA = watch("r1").mark();
    await reg("r2").isolate(ENGINE, "held for the new replica");
    await watch("r1").next(markA, "QUARANTINED", ENGINE);

    const [c] = await startReplicas(1, { store: db.url({ pool_max: 3 }), config: config("500ms") });
    await connect("r3", c!);
    const seen = await reg("r3").get(ENGINE);
    expect(seen).toMatchObject({ engineId: ENGINE, owner: "acme", endpoint: engine.address });
    expect(seen.quarantine).toMatchObject({ manual: true, reason: "held for the new replica" });
    await cx("r3").appendMessages({ session: { sessionId: "at-c" }, messages });
    const answer = await assemble("r3", "at-c");
    expect(answer).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(answer.fallbackReason).toContain("held for the new replica");

    // Cleared at the new replica: the others release it.
    const marks = ["r1", "r2"].map((n) => watch(n).mark());
    await reg("r3").clear(ENGINE);
    await Promise.all(["r1", "r2"].map((n, i) => watch(n).next(marks[i]!, "RELEASED", ENGINE)));
    expect(await assemble("r2", "at-b")).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
  });

  it("a missed notification is repaired: by the periodic reconcile, and by the LISTEN connection's reconnection", async () => {
    // A record written without NOTIFY (as if the notification were lost): C's reconcile applies it.
    const q = QuarantineState.fromPartial({
      operation: "manual",
      reason: "written behind the replicas' backs",
      failedAtMs: Date.now(),
      ejections: 1,
      manual: true,
    });
    const markC = watch("r3").mark();
    const before = count("r3", "engine quarantined at another replica");
    await admin.query("INSERT INTO engine_quarantines (engine_id, payload, updated_at_ms) VALUES ($1, $2, $3)", [
      ENGINE,
      Buffer.from(QuarantineState.encode(q).finish()),
      Date.now(),
    ]);
    const applied = await watch("r3").next(markC, "QUARANTINED", ENGINE, 5_000);
    expect(applied.engine?.quarantine?.reason).toBe("written behind the replicas' backs");
    expect((await logOf("r3", "engine quarantined at another replica", before)).via).toBe("reconcile");
    const markC2 = watch("r3").mark();
    await admin.query("DELETE FROM engine_quarantines WHERE engine_id = $1", [ENGINE]);
    await watch("r3").next(markC2, "RELEASED", ENGINE, 5_000);

    // Kill every replica's LISTEN connection, then change the registry at once.
    const listeners = (await admin.query<{ pid: number }>(LISTENERS, [db.name])).rows;
    expect(listeners.length).toBe(3);
    const reconnects = ["r1", "r2", "r3"].map(
      (n) =>
        named(n)
          .current.logLines()
          .filter((l) => l.msg === "registry listener reconnected").length,
    );
    const markB = watch("r2").mark();
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd registry listener'", [
      db.name,
    ]);
    await reg("r1").isolate(ENGINE, "while nobody listened");
    const late = await watch("r2").next(markB, "QUARANTINED", ENGINE, 10_000);
    expect(late.engine?.quarantine?.reason).toBe("while nobody listened");
    for (const [i, n] of ["r1", "r2", "r3"].entries()) {
      let seen = 0;
      await named(n).current.waitForLog((l) => l.msg === "registry listener reconnected" && seen++ >= reconnects[i]!, 10_000);
    }
    const fresh = (await admin.query<{ pid: number }>(LISTENERS, [db.name])).rows;
    expect(fresh.length).toBe(3);
    expect(fresh.some((r) => listeners.some((l) => l.pid === r.pid))).toBe(false);

    // And notifications flow again.
    const marks = ["r2", "r3"].map((n) => watch(n).mark());
    const clearedAt = Date.now();
    await reg("r1").clear(ENGINE);
    await Promise.all(["r2", "r3"].map((n, i) => watch(n).next(marks[i]!, "RELEASED", ENGINE)));
    expect(Date.now() - clearedAt).toBeLessThan(1_000);
  });

  it("deregistered at B: A and C forget the engine", async () => {
    const marks = ["r1", "r3"].map((n) => watch(n).mark());
    expect((await reg("r2").deregister(ENGINE)).deregistered).toBe(true);
    const events = await Promise.all(["r1", "r3"].map((n, i) => watch(n).next(marks[i]!, "DEREGISTERED", ENGINE)));
    for (const e of events) expect(e.message).toBe("deregistered at another replica");
    for (const n of ["r1", "r2", "r3"]) {
      expect((await reg(n).list()).engines.map((e) => e.engineId)).toEqual(["legacy"]);
      const answer = await assemble(n, n === "r1" ? "at-a" : n === "r2" ? "at-b" : "at-c");
      expect(answer).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      expect(answer.fallbackReason).toContain(`engine "${ENGINE}" is not registered`);
    }
    const gone = await refusal(reg("r1").get(ENGINE));
    expect(gone.code).toBe(status.NOT_FOUND);
  });

  it("two owners registering one new id at two replicas at once: exactly one owns it, everywhere", async () => {
    const RACED = "raced-engine";
    // Two sidecars answering GetInfo for the same id, registered by hand (not by their SDK) so that
    // both registrations leave at the same moment.
    const sidecars = await Promise.all([startTsEngine({ engineId: RACED }), startTsEngine({ engineId: RACED })]);
    try {
      for (let round = 0; round < 5; round++) {
        const marks = ["r1", "r2"].map((n) => watch(n).mark());
        const [a, b] = await Promise.all([
          reg("r1").register({ engineId: RACED, owner: "team-a", endpoint: sidecars[0]!.address }),
          reg("r2").register({ engineId: RACED, owner: "team-b", endpoint: sidecars[1]!.address }),
        ]);
        expect([a.ok, b.ok].filter(Boolean), `round ${round}: one winner`).toHaveLength(1);
        const [win, lose, winner, winAt] = a.ok ? [a, b, "team-a", "r1"] : [b, a, "team-b", "r2"];
        expect(win.engine?.owner).toBe(winner);
        expect(lose).toMatchObject({ ok: false, existingOwner: winner });
        expect(refusalName(lose.refusal)).toBe("REFUSAL_OWNED_BY_OTHER");
        // The other replica learns the winner's registration; both list the same owner.
        const other = winAt === "r1" ? 1 : 0;
        await watch(["r1", "r2"][other]!).next(marks[other]!, "REGISTERED", RACED);
        for (const n of ["r1", "r2"]) expect((await reg(n).list()).engines.find((e) => e.engineId === RACED)?.owner, n).toBe(winner);
        const gone = ["r1", "r2"].map((n) => watch(n).mark());
        expect((await reg(winAt).deregister(RACED)).deregistered).toBe(true);
        await watch(["r1", "r2"][other]!).next(gone[other]!, "DEREGISTERED", RACED);
      }
    } finally {
      await Promise.all(sidecars.map((e) => e.stop()));
    }
  });
});
