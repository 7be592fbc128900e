/**
 * One engine id served by two sidecar processes over gRPC (docs/registry.md, "Instances"): both
 * register as instances of the id, both receive calls, and stopping one (SIGSTOP) or killing it
 * (SIGKILL) makes no call fall back to legacy — the Assembles it fails go to the other instance, and
 * it alone is quarantined.
 * The router's choices in detail, in process: test/unit/registry/instances.test.ts.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { eventually, refusal, registryClient } from "../helpers/registry-client.js";

const ENGINE = "py-window";
const CONFIG = {
  slots: { context_engine: ENGINE },
  engines: {
    timeouts: { assemble: "800ms", compact: "600ms", ingest: "800ms" },
    health: { interval: "200ms", timeout: "150ms", unhealthy_threshold: 2, remove_after: "3s" },
    quarantine: { base_ejection: "1s", max_ejection: "3s" },
  },
};

describe("an engine id served by two sidecar instances", () => {
  let contextd: ContextdProcess;
  let engines: EngineProcess[] = [];
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const session = { sessionId: "balanced" };

  beforeAll(async () => {
    contextd = await startContextd({ config: CONFIG });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    registry = registryClient(contextd.address);
    await cx.appendMessages({ session, messages: codingSession({ turns: 4, seed: 5 }).messages });
    engines = await Promise.all([0, 1].map(() => startPythonEngine({ engineId: ENGINE, registry: contextd.address, owner: "team" })));
    for (const e of engines) expect((await e.registered).ok).toBe(true);
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await Promise.all(engines.map((e) => e.stop().catch(() => undefined)));
    await contextd?.cleanup();
  });

  it("holds both as instances of the one engine id, each named by its endpoint", async () => {
    const status = await registry.get(ENGINE);
    expect(status.instances.map((i) => i.endpoint).sort()).toEqual(engines.map((e) => e.address).sort());
    expect(status.instances.map((i) => i.instanceId).sort()).toEqual(engines.map((e) => e.address).sort());
    expect(status.quarantine).toBeUndefined();
  });

  it("sends calls to both instances, every answer the engine's (its id, NORMAL)", async () => {
    for (let i = 0; i < 12; i++) {
      const res = await cx.assemble({ session, tokenBudget: 16_000 });
      expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    }
    const status = await registry.get(ENGINE);
    for (const instance of status.instances) expect(instance.calls).toBeGreaterThan(0);
    expect(status.fallbacks).toBe(0);
  });

  it("SIGSTOP one instance: the Assembles it hangs on go to the other at its deadline, none to legacy; SIGCONT brings it back", async () => {
    const [stopped, running] = engines;
    const before = (await registry.get(ENGINE)).fallbacks;
    process.kill(stopped.pid, "SIGSTOP");
    try {
      for (let i = 0; i < 6; i++) {
        const res = await cx.assemble({ session, tokenBudget: 16_000 });
        expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
      }
      const status = await registry.get(ENGINE);
      expect(status.fallbacks).toBe(before);
      expect(status.instances.find((i) => i.endpoint === stopped.address)?.quarantine).toBeDefined();
      expect(status.instances.find((i) => i.endpoint === running.address)?.quarantine).toBeUndefined();
    } finally {
      process.kill(stopped.pid, "SIGCONT");
    }
    // Released by its own passing health check after the ejection time.
    await eventually(async () => (await registry.get(ENGINE)).instances.every((i) => i.quarantine === undefined), 15_000);
  });

  it("kill -9 one instance: no call falls back to legacy, and only that instance is quarantined", async () => {
    const [killed, survivor] = engines;
    await killed.kill9();
    for (let i = 0; i < 12; i++) {
      const res = await cx.assemble({ session, tokenBudget: 16_000 });
      expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    }
    await eventually(async () => (await registry.get(ENGINE)).instances.find((i) => i.endpoint === killed.address)?.quarantine !== undefined, 10_000);
    const status = await registry.get(ENGINE);
    expect(status.fallbacks).toBe(0);
    expect(status.quarantine).toBeUndefined();
    expect(status.instances.find((i) => i.endpoint === survivor.address)?.quarantine).toBeUndefined();
  });

  it("the dead instance is removed once its checks have failed for remove_after; the engine serves on", async () => {
    const [, survivor] = engines;
    await eventually(async () => (await registry.get(ENGINE)).instances.length === 1, 15_000);
    const status = await registry.get(ENGINE);
    expect(status.instances.map((i) => i.endpoint)).toEqual([survivor.address]);
    expect(await cx.assemble({ session, tokenBudget: 16_000 })).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
  });

  it("an SDK engine naming its instance and locality is registered as such, and stopping removes that instance alone", async () => {
    const [, survivor] = engines;
    const named = await startTsEngine({
      engineId: ENGINE,
      registry: contextd.address,
      owner: "team",
      env: { CONTEXTD_ENGINE_INSTANCE_ID: "pod-a", CONTEXTD_ENGINE_REPLICA: "replica-1", CONTEXTD_ENGINE_ZONE: "z1" },
    });
    try {
      expect(await named.registered).toMatchObject({ ok: true });
      const added = (await registry.get(ENGINE)).instances.find((i) => i.instanceId === "pod-a");
      expect(added).toMatchObject({ endpoint: named.address, locality: { replica: "replica-1", zone: "z1", node: "" } });
    } finally {
      await named.stop();
    }
    expect((await registry.get(ENGINE)).instances.map((i) => i.endpoint)).toEqual([survivor.address]);
  });

  it("same-owner refresh is per instance: a new instance is added without it, the same one needs it, another owner gets none", async () => {
    const [, survivor] = engines;
    const base = { engineId: ENGINE, owner: "team", endpoint: survivor.address, instanceId: "alias-1", protocolVersions: [1] };
    const added = await registry.register(base);
    expect(added).toMatchObject({ ok: true, refusal: Refusal.REFUSAL_NONE, instanceId: "alias-1" });
    expect(added.engine?.instances.map((i) => i.instanceId).sort()).toEqual(["alias-1", survivor.address].sort());
    expect(await registry.register(base)).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ALREADY_REGISTERED, existingOwner: "team" });
    expect(await registry.register({ ...base, allowSameOwnerRefresh: true, locality: { zone: "z9" } })).toMatchObject({ ok: true });
    expect((await registry.get(ENGINE)).instances.find((i) => i.instanceId === "alias-1")?.locality?.zone).toBe("z9");
    expect(await registry.register({ ...base, owner: "other", instanceId: "theirs" })).toMatchObject({
      ok: false,
      refusal: Refusal.REFUSAL_OWNED_BY_OTHER,
      existingOwner: "team",
    });
    expect((await refusal(registry.register({ ...base, instanceId: "bad\u202eid" }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await refusal(registry.register({ ...base, locality: { node: "no spaces" } }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await refusal(registry.deregister(ENGINE, undefined, "never-registered"))).code).toBe(status.NOT_FOUND);
    expect(await registry.deregister(ENGINE, undefined, "alias-1")).toEqual({ deregistered: true });
    expect((await registry.get(ENGINE)).instances.map((i) => i.instanceId)).toEqual([survivor.address]);
  });
});
