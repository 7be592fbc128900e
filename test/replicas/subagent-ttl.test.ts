/**
 * Issue 10, part 5 with several replicas: two contextd processes on one scratch PostgreSQL
 * database both sweep expired subagent sessions every 100 ms; children are spawned through both.
 * The engine (a real sidecar, registered at A only — B learns of it from the database) hears
 * OnSubagentEnded with reason SWEPT exactly once per child, whichever replica claimed it
 * (claimExpiredSubagents: FOR UPDATE SKIP LOCKED), and an EndSubagent at the other replica
 * afterwards does not tell it again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubagentContextMode, SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { watchEngines } from "../reliability/helpers/engine-watch.js";

const ENGINE = "ttl-engine";
const CHILDREN = 24;

describe("subagent TTL with two replicas on PostgreSQL", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];
  let clients: ContextdClient[];
  let engine: EngineProcess;
  const parent = { sessionId: "parent", agentId: "coder" };

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(2, {
      store: db.url({ pool_max: 3 }),
      config: { slots: { context_engine: ENGINE }, subagents: { sweep_interval: "100ms" } },
    });
    clients = replicas.map((r) => new ContextdClient({ address: r.address, timeoutMs: 30_000 }));
    const watchB = await watchEngines(replicas[1]!.address);
    try {
      engine = await startTsEngine({ engineId: ENGINE, registry: replicas[0]!.address, owner: "acme", capabilities: ["subagents"], heartbeatMs: 3_600_000 });
      expect(await engine.registered).toMatchObject({ ok: true });
      await watchB.next(0, "REGISTERED", ENGINE);
    } finally {
      watchB.close();
    }
    await clients[0]!.appendMessages({ session: parent, messages: [user("split the work into subagents")] });
  });
  afterAll(async () => {
    for (const c of clients ?? []) c.close();
    await engine?.stop();
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  it("each expired child is swept once: the engine hears exactly one SWEPT per child", async () => {
    const ids = Array.from({ length: CHILDREN }, (_, i) => `child-${String(i).padStart(2, "0")}`);
    await Promise.all(
      ids.map((sessionId, i) =>
        clients[i % 2]!.prepareSubagentSpawn({
          parent,
          child: { sessionId, agentId: "coder" },
          contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK,
          ttlMs: 200 + (i % 4) * 50,
        }),
      ),
    );
    for (const sessionId of ids) await engine.waitForEvent((e) => e.event === "subagent_ended" && e.session_id === sessionId, 20_000);

    // A barrier child, swept well after every other child: sweeps at both replicas ran meanwhile.
    await clients[1]!.prepareSubagentSpawn({
      parent,
      child: { sessionId: "barrier", agentId: "coder" },
      contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED,
      ttlMs: 500,
    });
    await engine.waitForEvent((e) => e.event === "subagent_ended" && e.session_id === "barrier", 20_000);

    // EndSubagent at the replica that did not sweep it (or did: either way) tells the engine nothing.
    for (const [i, sessionId] of ids.entries()) {
      await clients[(i + 1) % 2]!.endSubagent({ child: { sessionId, agentId: "coder" }, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED });
    }
    const from = engine.events().length;
    await clients[0]!.assemble({ session: parent, tokenBudget: 100_000 });
    await engine.waitForEvent((e, i) => i >= from && e.event === "call" && e.op === "assemble");

    const ended = engine.events().filter((e) => e.event === "subagent_ended");
    for (const sessionId of [...ids, "barrier"]) {
      expect(
        ended.filter((e) => e.session_id === sessionId).map((e) => e.reason),
        sessionId,
      ).toEqual(["SUBAGENT_END_REASON_SWEPT"]);
    }
    expect(ended.length).toBe(CHILDREN + 1);

    const sweptBy = replicas.map((r) =>
      r.current
        .logLines()
        .filter((l) => l.msg === "subagent swept: its ttl_ms passed")
        .map((l) => l.sessionId as string),
    );
    expect(sweptBy.flat().sort()).toEqual([...ids, "barrier"].sort());
    console.log(JSON.stringify({ test: "subagent TTL sweep across replicas", swept_by_replica: sweptBy.map((s) => s.length) }));

    // The children are kept (marked ended), readable at either replica.
    for (const cx of clients) expect((await cx.getSession({ session: { sessionId: ids[0]! } })).info?.parentSessionId).toBe("parent");
  });
});
