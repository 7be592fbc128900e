/**
 * Engine instances across replicas (docs/registry.md, "Instances"): two contextd replicas on one
 * scratch PostgreSQL database, and two sidecar processes (the TypeScript test engine) serving one
 * engine id, each registered at a different replica. Each replica applies the other's instance
 * beside its own (LISTEN/NOTIFY), calls both, and when one sidecar is killed (SIGKILL) no call at
 * either replica falls back to legacy; deregistering the dead instance at one replica removes it,
 * and only it, at the other.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

const ENGINE = "scaled-engine";
const CONFIG = {
  slots: { context_engine: ENGINE },
  engines: {
    reconcile_interval: "30s",
    timeouts: { assemble: "800ms" },
    health: { interval: "300ms", timeout: "200ms", unhealthy_threshold: 2 },
    quarantine: { base_ejection: "1s", max_ejection: "3s" },
  },
};

describe("one engine id, two sidecar instances, two replicas on PostgreSQL", () => {
  let db: ScratchDatabase;
  let replicas: Replica[] = [];
  let engines: EngineProcess[] = [];
  let clients: ContextdClient[] = [];
  let registries: Array<ReturnType<typeof registryClient>> = [];
  const messages = codingSession({ turns: 4, seed: 3 }).messages;
  const endpointsAt = async (r: number) => (await registries[r]!.get(ENGINE)).instances.map((i) => i.endpoint).sort();

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(2, { store: db.url({ pool_max: 3 }), config: CONFIG });
    clients = replicas.map((r) => new ContextdClient({ address: r.address, timeoutMs: 30_000 }));
    registries = replicas.map((r) => registryClient(r.address));
    // Each sidecar registers at its own replica.
    engines = await Promise.all(replicas.map((r) => startTsEngine({ engineId: ENGINE, registry: r.address, owner: "acme" })));
    for (const e of engines) expect(await e.registered).toMatchObject({ ok: true });
    for (const [i, c] of clients.entries()) await c.appendMessages({ session: { sessionId: `s${i}` }, messages });
  });
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.stop().catch(() => undefined)));
    for (const c of clients) c.close();
    for (const r of registries) r.close();
    await stopReplicas(replicas);
    await db?.drop();
  });

  it("each replica holds both instances: its own and the one registered at the other", async () => {
    const all = engines.map((e) => e.address).sort();
    for (const r of [0, 1]) await eventually(async () => JSON.stringify(await endpointsAt(r)) === JSON.stringify(all), 10_000);
  });

  it("each replica calls both instances, answering as the engine", async () => {
    for (const r of [0, 1]) {
      for (let i = 0; i < 8; i++) {
        expect(await clients[r]!.assemble({ session: { sessionId: `s${r}` }, tokenBudget: 200_000 })).toMatchObject({
          engineId: ENGINE,
          mode: Mode.MODE_NORMAL,
        });
      }
      const status = await registries[r]!.get(ENGINE);
      for (const instance of status.instances) expect(instance.calls, `replica ${r}, instance ${instance.endpoint}`).toBeGreaterThan(0);
    }
  });

  it("kill -9 one instance: no call at either replica falls back to legacy", async () => {
    const [killed] = engines;
    await killed!.kill9();
    for (const r of [0, 1]) {
      for (let i = 0; i < 8; i++) {
        const res = await clients[r]!.assemble({ session: { sessionId: `s${r}` }, tokenBudget: 200_000 });
        expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
      }
      expect((await registries[r]!.get(ENGINE)).fallbacks).toBe(0);
    }
  });

  it("deregistering the dead instance at one replica removes it, and only it, at the other", async () => {
    const [killed, survivor] = engines;
    expect(await registries[1]!.deregister(ENGINE, undefined, killed!.address)).toEqual({ deregistered: true });
    await eventually(async () => JSON.stringify(await endpointsAt(0)) === JSON.stringify([survivor!.address]), 10_000);
    expect(await clients[0]!.assemble({ session: { sessionId: "s0" }, tokenBudget: 200_000 })).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
  });
});
