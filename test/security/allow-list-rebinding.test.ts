/**
 * Red-team finding about engines.allow_endpoints (issue 12): an allowed name was checked once, and
 * what it resolved to later was dialled unchecked (DNS rebinding). Now contextd dials the checked
 * addresses, and every health check resolves the name again: allowed new addresses re-point the
 * channel; a disallowed one quarantines the engine, naming the address, and is not dialled.
 *
 * The registry's real components (registry, quarantine on a real SQLite store, health monitor,
 * the engine built from a stored registration) and two real engine processes, one at 127.0.0.1
 * and one at 127.0.0.2 on the same port. The resolver is the allow list's parameter: a DNS record
 * the test changes, which the system resolver cannot be made to do per test.
 */
import { credentials } from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineInfo } from "../../src/contract/gen/contextd/v1/engine.js";
import { EngineHealth } from "../../src/contract/gen/contextd/v1/registry.js";
import { LegacyEngine } from "../../src/registry/legacy-engine.js";
import { restoredEngine } from "../../src/registry/admission.js";
import { DEFAULT_ANSWER_LIMITS } from "../../src/registry/answer-limits.js";
import { EndpointAllowList } from "../../src/registry/endpoint-allow-list.js";
import { EngineEvents } from "../../src/registry/engine-events.js";
import { EngineRegistry, type RegisteredEngine } from "../../src/registry/engine-registry.js";
import { HealthMonitor } from "../../src/registry/health-monitor.js";
import { Quarantine } from "../../src/registry/quarantine.js";
import { EndpointRefusedError } from "../../src/registry/remote-engine.js";
import { openStore, type ContextdStore } from "../../src/store/open-store.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";

describe("finding: allow-list bypasses — re-checked when a name's address changes", () => {
  let dir: string;
  let store: ContextdStore;
  let first: EngineProcess;
  let second: EngineProcess;
  let engine: RegisteredEngine;
  let monitor: HealthMonitor;
  /** The DNS record of engine.test, as the test sets it. */
  let record = ["127.0.0.1"];
  const asked: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "allow-rebinding-"));
    store = await openStore(`sqlite:${path.join(dir, "contextd.db")}`);
    first = await startTsEngine({ engineId: "first" });
    const port = Number(first.address.split(":")[1]);
    second = await startTsEngine({ engineId: "second", listen: `127.0.0.2:${port}` });
    const allowList = new EndpointAllowList(["engine.test", "127.0.0.0/8"], async (host) => {
      asked.push(host);
      return record.map((address) => ({ address, family: 4 }));
    });
    // The built-in engine is never called here: the monitor checks sidecars only.
    const registry = new EngineRegistry(new LegacyEngine({} as ConstructorParameters<typeof LegacyEngine>[0]));
    const events = new EngineEvents();
    const log = pino({ level: "silent" });
    const quarantine = new Quarantine(registry, store, { baseEjectionMs: 60_000, maxEjectionMs: 60_000 }, events, log);
    monitor = new HealthMonitor(registry, quarantine, events, { intervalMs: 60_000, timeoutMs: 2_000, unhealthyThreshold: 3 }, log);
    const info = EngineInfo.fromPartial({ id: "rebound", name: "rebound", protocolVersions: [1] });
    // As a registration read from the store (another replica's, or from before a restart).
    engine = restoredEngine(
      {
        engineId: "rebound",
        instanceId: `engine.test:${port}`,
        locality: undefined,
        owner: "acme",
        endpoint: `engine.test:${port}`,
        info,
        protocolVersion: 1,
        registeredAtMs: Date.now(),
      },
      { credentials: credentials.createInsecure(), answerLimits: DEFAULT_ANSWER_LIMITS },
      allowList,
    );
    registry.set(engine);
  });
  afterAll(async () => {
    engine?.remote?.close();
    await Promise.all([first?.stop(), second?.stop()]);
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const answeredBy = async () => (await engine.remote!.getInfo(2_000))?.id;

  it("the name is checked before the first dial, and the checked address is what answers", async () => {
    await monitor.check(engine);
    expect(engine.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);
    expect(asked).toContain("engine.test");
    expect(await answeredBy()).toBe("first");
  });

  it("a new allowed address re-points the channel", async () => {
    record = ["127.0.0.2"];
    await monitor.check(engine);
    expect(engine.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);
    expect(await answeredBy()).toBe("second");
  });

  it("a disallowed address (cloud metadata) quarantines the engine naming the address, and is not dialled", async () => {
    record = ["169.254.169.254"];
    await monitor.check(engine);
    expect(engine.quarantine?.reason).toContain("169.254.169.254");
    expect(engine.quarantine?.reason).toContain("link-local");
    expect(engine.health).toBe(EngineHealth.ENGINE_HEALTH_UNKNOWN);
    // Refused at once, before any connection attempt (a dial of that address would time out).
    const started = Date.now();
    await expect(engine.remote!.getInfo(2_000)).rejects.toBeInstanceOf(EndpointRefusedError);
    expect(Date.now() - started).toBeLessThan(500);
    // The record is the instance's (an engine's instances are quarantined one at a time).
    expect((await store.listInstanceQuarantines()).get("rebound")?.get(engine.instanceId)?.reason).toContain("169.254.169.254");
  });

  it("once the name resolves into the list again, the engine is dialled there again", async () => {
    record = ["127.0.0.1"];
    await monitor.check(engine);
    expect(engine.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);
    expect(await answeredBy()).toBe("first");
  });
});
