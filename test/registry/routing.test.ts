import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";
import { toolPairViolations } from "../helpers/invariants.js";
import { eventually, registryClient } from "../helpers/registry-client.js";

const ENGINE = "py-window";
const CONFIG = {
  slots: { context_engine: ENGINE },
  engines: {
    timeouts: { assemble: "800ms", compact: "600ms", ingest: "800ms" },
    health: { interval: "200ms", timeout: "150ms", unhealthy_threshold: 2 },
    quarantine: { base_ejection: "1s", max_ejection: "3s" },
  },
};

describe("routing to a sidecar engine, with deadlines, quarantine and fallback", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const session = { sessionId: "routed" };
  const conversation = codingSession({ turns: 6, seed: 11 }).messages;

  beforeAll(async () => {
    contextd = await startContextd({ config: CONFIG });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    registry = registryClient(contextd.address);
    await cx.appendMessages({ session, messages: conversation });
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("an unregistered slot answers from legacy in FALLBACK mode, with a reason", async () => {
    const res = await cx.assemble({ session, tokenBudget: 16_000 });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain(`"${ENGINE}" is not registered`);
  });

  it("once registered, the slot routes to the engine (NORMAL)", async () => {
    engine = await startPythonEngine({ engineId: ENGINE, registry: contextd.address, owner: "team" });
    expect((await engine.registered).ok).toBe(true);
    const res = await cx.assemble({ session, tokenBudget: 16_000 });
    expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    expect(res.estimatedTokens).toBeLessThanOrEqual(16_000);
    expect(toolPairViolations(res.messages)).toEqual([]);
  });

  it("an engine that throws is quarantined; the call is answered by legacy", async () => {
    engine.control({ assemble: "throw" });
    const res = await cx.assemble({ session, tokenBudget: 16_000 });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain("failed on assemble");
    const status = await registry.get(ENGINE);
    expect(status.quarantine).toMatchObject({ operation: "assemble", manual: false, ejections: 1 });
    expect(status.failures).toBeGreaterThanOrEqual(1);
    expect(status.fallbacks).toBeGreaterThanOrEqual(1);
    // While quarantined, calls go straight to legacy and say so.
    const next = await cx.assemble({ session, tokenBudget: 16_000 });
    expect(next.fallbackReason).toContain("quarantined");
  });

  it("released by a passing health check after the ejection time", async () => {
    engine.control({ assemble: "ok" });
    await eventually(async () => (await registry.get(ENGINE)).quarantine === undefined, 10_000);
    expect((await cx.assemble({ session, tokenBudget: 16_000 })).engineId).toBe(ENGINE);
  });

  it("an over-budget answer breaks the contract: quarantined, answered by legacy within budget", async () => {
    engine.control({ assemble: "garbage" });
    const res = await cx.assemble({ session, tokenBudget: 16_000 });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain("over the token_budget");
    expect(res.estimatedTokens).toBeLessThanOrEqual(16_000);
    expect((await registry.get(ENGINE)).quarantine?.reason).toContain("contract");
    engine.control({ assemble: "ok" });
    await eventually(async () => (await registry.get(ENGINE)).quarantine === undefined, 10_000);
  });

  it("a hanging Assemble is answered within its deadline plus a margin, by legacy", async () => {
    engine.control({ assemble: "hang" });
    const started = Date.now();
    const res = await cx.assemble({ session, tokenBudget: 16_000 });
    const elapsed = Date.now() - started;
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(elapsed).toBeLessThan(800 + 1_500);
    expect((await registry.get(ENGINE)).timeouts).toBeGreaterThanOrEqual(1);
    await engine.waitForEvent((e) => e.event === "cancelled" && e.op === "assemble", 5_000);
    engine.control({ assemble: "ok" });
    await eventually(async () => (await registry.get(ENGINE)).quarantine === undefined, 10_000);
  });

  it("NOT_SERVING twice in a row quarantines; recovery releases after the ejection time", async () => {
    engine.control({ health: "NOT_SERVING" });
    const q = await eventually(async () => (await registry.get(ENGINE)).quarantine, 5_000);
    expect(q.operation).toBe("health");
    expect((await registry.get(ENGINE)).health).toBe(EngineHealth.ENGINE_HEALTH_NOT_SERVING);
    expect((await cx.assemble({ session, tokenBudget: 16_000 })).engineId).toBe("legacy");
    engine.control({ health: "SERVING" });
    await eventually(async () => (await registry.get(ENGINE)).quarantine === undefined, 10_000);
    expect((await cx.assemble({ session, tokenBudget: 16_000 })).engineId).toBe(ENGINE);
  });

  it("an operator's isolation holds until cleared, even while healthy", async () => {
    await registry.isolate(ENGINE, "maintenance window");
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await registry.get(ENGINE)).quarantine).toMatchObject({ manual: true, reason: "maintenance window" });
    expect((await cx.assemble({ session, tokenBudget: 16_000 })).engineId).toBe("legacy");
    await registry.clear(ENGINE);
    expect((await cx.assemble({ session, tokenBudget: 16_000 })).engineId).toBe(ENGINE);
  });

  it("an engine killed under steady Assemble traffic costs the runtime zero failed calls", async () => {
    let stop = false;
    const served: string[] = [];
    const failures: unknown[] = [];
    const loop = async () => {
      while (!stop) {
        try {
          served.push((await cx.assemble({ session, tokenBudget: 16_000 }, { timeoutMs: 5_000 })).engineId);
        } catch (err) {
          failures.push(err);
        }
      }
    };
    const loops = [loop(), loop(), loop(), loop()];
    await new Promise((r) => setTimeout(r, 700));
    await engine.kill9();
    await new Promise((r) => setTimeout(r, 1_500));
    stop = true;
    await Promise.all(loops);
    expect(failures).toEqual([]);
    expect(served).toContain(ENGINE);
    expect(served[served.length - 1]).toBe("legacy");
    expect((await registry.get(ENGINE)).quarantine).toBeDefined();
  });
});
