/**
 * Issue 11: an engine killed and restarted at the SAME address must be admitted, health-checked
 * and routed to again at once — not refused or failed fast because contextd's connection to that
 * address is still waiting out its reconnect backoff from the engine's death.
 *
 * Each test first makes contextd see the dead address several times (failed health checks in a
 * row, so grpc-js' reconnect backoff has grown), then starts a new engine process on the same port.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth, Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { compileTsEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { registryClient } from "../helpers/registry-client.js";

const HEALTH_INTERVAL_MS = 200;
const CONFIG = {
  log_level: "debug",
  slots: { context_engine: "restarter" },
  engines: {
    timeouts: { assemble: "1s", ingest: "1s" },
    // Failed checks are what grow the reconnect backoff; a threshold this high keeps the dead engine
    // out of quarantine, so that the routing test sees what a routed call does on its own.
    health: { interval: `${HEALTH_INTERVAL_MS}ms`, timeout: "150ms", unhealthy_threshold: 1000 },
  },
};

describe("an engine restarted at the same address", () => {
  let contextd: ContextdProcess;
  let registry: ReturnType<typeof registryClient>;
  let cx: ContextdClient;
  const engines: EngineProcess[] = [];

  beforeAll(async () => {
    await compileTsEngine();
    contextd = await startContextd({ config: CONFIG });
    registry = registryClient(contextd.address);
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 10_000 });
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await Promise.all(engines.map((e) => e.kill9()));
    await contextd?.cleanup();
  });

  async function start(listen: string, opts: { register?: boolean } = {}): Promise<EngineProcess> {
    const engine = await startTsEngine({
      engineId: "restarter",
      listen,
      ...(opts.register ? { registry: contextd.address, owner: "team" } : {}),
    });
    engines.push(engine);
    return engine;
  }

  /** Failed health checks of the engine logged so far (contextd logs each at debug). */
  const failedChecks = () => contextd.logLines().filter((l) => l.msg === "health check failed" && l.engineId === "restarter").length;

  /** Kills the engine and waits until contextd has failed `n` more health checks against its address. */
  async function killAndLetBackoffGrow(engine: EngineProcess, n = 4): Promise<void> {
    const before = failedChecks();
    await engine.kill9();
    await contextd.waitForLog(() => failedChecks() >= before + n, n * HEALTH_INTERVAL_MS + 10_000);
  }

  it("admission: registering again right away is admitted, not refused UNREACHABLE", async () => {
    const listen = `127.0.0.1:${await getFreePort()}`;
    const first = await start(listen);
    const res1 = await registry.register({ engineId: "restarter", owner: "team", endpoint: listen, allowSameOwnerRefresh: true });
    expect(res1.ok, res1.message).toBe(true);

    await killAndLetBackoffGrow(first);
    await start(listen);
    const res2 = await registry.register({ engineId: "restarter", owner: "team", endpoint: listen, allowSameOwnerRefresh: true });
    expect(res2.message).toBe("registered");
    expect(res2).toMatchObject({ ok: true, refusal: Refusal.REFUSAL_NONE });
    expect((await registry.get("restarter")).health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);
  });

  it("health checks: a restarted engine that does not register again passes the next check", async () => {
    const listen = (await registry.get("restarter")).endpoint;
    // Enough failures for the backoff to reach its 2 s cap.
    await killAndLetBackoffGrow(engines.at(-1)!, 12);
    expect((await registry.get("restarter")).health).not.toBe(EngineHealth.ENGINE_HEALTH_SERVING);

    const linesBefore = contextd.logLines().length;
    await start(listen);
    const failedBefore = failedChecks();
    // One of the next rounds of checks after the restart must pass. The reconnect backoff alone
    // was up to 2 s, ten rounds; the round in flight when the engine came up may still fail, and
    // one more on a loaded machine (150 ms per check).
    await contextd.waitForLog(
      (l) => l.msg === "engine health changed" && l.engineId === "restarter" && l.health === "SERVING" && contextd.logLines().indexOf(l) >= linesBefore,
      10_000,
    );
    expect(failedChecks() - failedBefore).toBeLessThanOrEqual(3);
  });

  it("routing: the first call after a restart (no re-registration, no health check yet) is served by the engine", async () => {
    const listen = (await registry.get("restarter")).endpoint;
    const session = { sessionId: "restart-routing" };
    await cx.appendMessages({ session, messages: [user("hello")] });
    await killAndLetBackoffGrow(engines.at(-1)!);

    await start(listen);
    const res = await cx.assemble({ session, tokenBudget: 4_000 });
    expect(res.fallbackReason).toBe("");
    expect(res).toMatchObject({ engineId: "restarter", mode: Mode.MODE_NORMAL });
    expect((await registry.get("restarter")).quarantine).toBeUndefined();
  });

  it("routing after re-registration: the engine is admitted at once and serves the next call", async () => {
    const listen = (await registry.get("restarter")).endpoint;
    const session = { sessionId: "restart-reregistered" };
    await cx.appendMessages({ session, messages: [user("hello")] });
    await killAndLetBackoffGrow(engines.at(-1)!);

    const refusedBefore = contextd.logLines().filter((l) => l.msg === "engine registration refused").length;
    const engine = await start(listen, { register: true });
    expect((await engine.registered).ok).toBe(true);
    // The SDK retries after an UNREACHABLE refusal, so "registered" alone would hide the bug.
    expect(contextd.logLines().filter((l) => l.msg === "engine registration refused").length).toBe(refusedBefore);
    const res = await cx.assemble({ session, tokenBudget: 4_000 });
    expect(res).toMatchObject({ engineId: "restarter", mode: Mode.MODE_NORMAL, fallbackReason: "" });
  });
});
