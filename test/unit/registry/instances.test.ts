/**
 * Engine instances (docs/registry.md, "Instances"), in process: the real Router, EngineRegistry,
 * HostGrants and Quarantine over a SQLite file, with one engine id served by several engines written
 * in the test (registry-fixture.ts), each registered as an instance. Fake timers drive every
 * deadline. The same against real sidecar processes over gRPC: test/registry/instances.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { CallContext, ContextEngine } from "../../../src/contract/engine-api.js";
import {
  ContextEngineServiceAssembleRequest,
  ContextEngineServiceCompactRequest,
  type ContextEngineServiceAssembleResponse,
} from "../../../src/contract/gen/contextd/v1/engine.js";
import type { Locality } from "../../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../../src/contract/gen/contextd/v1/types.js";
import { observeAll, type EngineCallObserver, type EngineFailover, type EngineFallback } from "../../../src/registry/engine-call-observer.js";
import { EngineUnreachableError } from "../../../src/registry/engine-channel.js";
import { engineCounters } from "../../../src/registry/engine-counters.js";
import type { CallerContext } from "../../../src/registry/engine-dispatch.js";
import { toEngineStatus } from "../../../src/registry/engine-registry.js";
import { HostGrants } from "../../../src/registry/host-grants.js";
import { Router, type RoutingSettings } from "../../../src/registry/router.js";
import { addSidecar, NO_DEADLINE, registryFixture, ScriptedEngine, SESSION, T0, TIMEOUTS } from "../registry-fixture.js";

const ASSEMBLE_MS = TIMEOUTS.assemble;

/** What metrics would hear: fallbacks to legacy and failovers to another instance. */
class Heard implements EngineCallObserver {
  readonly fallbacks: EngineFallback[] = [];
  readonly failovers: EngineFailover[] = [];
  fellBack(f: EngineFallback): void {
    this.fallbacks.push(f);
  }
  failedOver(f: EngineFailover): void {
    this.failovers.push(f);
  }
}

let f: ReturnType<typeof registryFixture>;

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
  f = registryFixture({ baseEjectionMs: 30_000, maxEjectionMs: 300_000 });
});

afterEach(async () => {
  vi.useRealTimers();
  await f.close();
});

/** Engine `e1` served by two instances, `a` and `b` (their localities as given), behind a real Router. */
function setup(settings: Partial<RoutingSettings> = {}, localities: { a?: Locality; b?: Locality } = {}) {
  const a = new ScriptedEngine("e1");
  const b = new ScriptedEngine("e1");
  const ia = addSidecar(f.registry, a, "team-a", { endpoint: "10.0.0.1:7000", locality: localities.a });
  const ib = addSidecar(f.registry, b, "team-a", { endpoint: "10.0.0.2:7000", locality: localities.b });
  const heard = new Heard();
  const router = new Router(
    f.registry,
    { contextEngine: "e1", agents: {}, timeoutsMs: TIMEOUTS, onFailure: "fallback", maxConcurrentCalls: 8, fallbackReserveMs: 0, overrides: {}, ...settings },
    new HostGrants("127.0.0.1:7070"),
    observeAll(engineCounters, f.quarantine, heard),
  );
  const assemble = (caller: CallerContext = NO_DEADLINE) =>
    router.call<ContextEngineServiceAssembleResponse>(router.select(SESSION), "assemble", caller, (engine: ContextEngine, ctx: CallContext) =>
      engine.assemble(ContextEngineServiceAssembleRequest.fromPartial({ session: SESSION, tokenBudget: 1_000 }), ctx),
    );
  const compact = () =>
    router.call(router.select(SESSION), "compact", NO_DEADLINE, (engine: ContextEngine, ctx: CallContext) =>
      engine.compact(ContextEngineServiceCompactRequest.fromPartial({ session: SESSION, tokenBudget: 1_000 }), ctx),
    );
  return { a, b, ia, ib, heard, router, assemble, compact };
}

describe("Instances: balancing", () => {
  it("spreads an engine's calls over its instances, and answers as the engine (its id, NORMAL)", async () => {
    const { a, b, heard, assemble } = setup();
    for (let i = 0; i < 10; i++) {
      const routed = await assemble();
      expect(routed).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL, fallbackReason: "" });
    }
    // Power of two choices over two instances with nothing in flight: the one called less wins.
    expect([a.calls.length, b.calls.length]).toEqual([5, 5]);
    expect(heard.fallbacks).toEqual([]);
    const status = f.registry.status("e1");
    expect(status.calls).toBe(10);
    expect(status.instances.map((i) => [i.instanceId, i.calls])).toEqual([
      ["10.0.0.1:7000", 5],
      ["10.0.0.2:7000", 5],
    ]);
  });

  it("calls this replica's local instance first, and the others only while it is at its bulkhead", async () => {
    const { a, b, assemble } = setup({ maxConcurrentCalls: 1, locality: { replica: "r2", node: "", zone: "" } }, { b: { replica: "r2", node: "", zone: "" } });
    await assemble();
    await assemble();
    expect([a.calls.length, b.calls.length]).toEqual([0, 2]);
    expect(f.registry.status("e1").instances.map((i) => i.local)).toEqual([false, true]);

    b.behaviour = { kind: "hold" };
    const held = assemble();
    await vi.waitFor(() => expect(b.holding).toBe(1));
    expect(f.registry.status("e1").instances.map((i) => i.outstandingCalls)).toEqual([0, 1]);
    // The local instance is at its bulkhead (1): the next call goes to the other, not to legacy.
    expect(await assemble()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    expect(a.calls.length).toBe(1);
    b.release();
    expect(await held).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
  });

  it("falls back to legacy, `rejected`, only when every instance is at its bulkhead", async () => {
    const { a, b, heard, assemble } = setup({ maxConcurrentCalls: 1 });
    a.behaviour = { kind: "hold" };
    b.behaviour = { kind: "hold" };
    const first = [assemble(), assemble()];
    await vi.waitFor(() => expect(a.holding + b.holding).toBe(2));
    expect([a.holding, b.holding]).toEqual([1, 1]);
    expect(await assemble()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(heard.fallbacks.map((x) => x.kind)).toEqual(["rejected"]);
    a.release();
    b.release();
    await Promise.all(first);
  });
});

describe("Instances: the engine is gone only with its last instance", () => {
  it("removing one instance leaves the engine serving on the other; removing the last leaves it not registered", async () => {
    const { a, b, ia, ib, router, assemble } = setup();
    expect(f.registry.delete("e1", ia.instanceId)).toBe(true);
    // What a DEREGISTERED event of the removed instance shows: the engine with the instances left.
    expect(toEngineStatus(ia).instances.map((i) => i.instanceId)).toEqual([ib.instanceId]);
    for (let i = 0; i < 3; i++) expect(await assemble()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    expect([a.calls.length, b.calls.length]).toEqual([0, 3]);
    expect(f.registry.delete("e1", ib.instanceId)).toBe(true);
    expect(toEngineStatus(ib).instances).toEqual([]);
    expect(f.registry.get("e1")).toBeUndefined();
    expect(router.select(SESSION)).toMatchObject({ mode: Mode.MODE_FALLBACK, fallbackKind: "not_registered" });
  });
});

describe("Instances: ejection one at a time, failover before fallback", () => {
  it("sends an Assemble an instance failed to another instance: no fallback, and only the failed instance is quarantined", async () => {
    const { a, b, ia, ib, heard, assemble } = setup();
    a.behaviour = { kind: "throw", error: new Error("boom") };
    // `a` is not local here (no replica configured): the first pick alternates, so call until `a` failed.
    for (let i = 0; i < 2; i++) expect(await assemble()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    expect(a.calls.length).toBe(1);
    expect(b.calls.length).toBe(2);
    expect(heard.fallbacks).toEqual([]);
    expect(heard.failovers.map((x) => [x.engine.instanceId, x.next.instanceId, x.op])).toEqual([["10.0.0.1:7000", "10.0.0.2:7000", "assemble"]]);
    expect(ia.quarantine?.operation).toBe("assemble");
    expect(ib.quarantine).toBeUndefined();
    const status = f.registry.status("e1");
    expect(status.quarantine).toBeUndefined(); // the engine serves on
    expect(status.instances.map((i) => Boolean(i.quarantine))).toEqual([true, false]);
    // The record is written after the answer's turn (setImmediate, faked here).
    await vi.advanceTimersByTimeAsync(1);
    await f.registry.localWritesSettled("e1");
    expect((await f.store.listInstanceQuarantines()).get("e1")?.has("10.0.0.1:7000")).toBe(true);
    // Every later call goes to the healthy instance.
    for (let i = 0; i < 3; i++) await assemble();
    expect(a.calls.length).toBe(1);
  });

  it("sends an Assemble an instance hung on to another within the caller's deadline", async () => {
    const { a, b, assemble } = setup({}, {});
    a.behaviour = { kind: "hang" };
    b.behaviour = { kind: "hang" };
    const first = assemble({ deadlineMs: T0 + 3 * ASSEMBLE_MS });
    await vi.waitFor(() => expect(a.calls.length + b.calls.length).toBe(1));
    const [hung, other] = a.calls.length === 1 ? [a, b] : [b, a];
    other.behaviour = { kind: "answer" };
    await vi.advanceTimersByTimeAsync(ASSEMBLE_MS);
    expect(await first).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    expect(hung.calls).toHaveLength(1);
    expect(other.calls).toHaveLength(1);
  });

  it("does not send a Compact an instance failed to another instance (it may have applied it): legacy answers", async () => {
    const { a, b, heard, compact } = setup();
    a.behaviour = { kind: "throw", error: new Error("boom") };
    b.behaviour = { kind: "throw", error: new Error("boom") };
    expect(await compact()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(a.calls.length + b.calls.length).toBe(1);
    expect(heard.failovers).toEqual([]);
    expect(heard.fallbacks.map((x) => x.kind)).toEqual(["error"]);
  });

  it("says so in the log, once a while, when fewer than half of an engine's instances serve (the panic threshold)", async () => {
    const { ia, ib, router, assemble } = setup();
    addSidecar(f.registry, new ScriptedEngine("e1"), "team-a", { endpoint: "10.0.0.3:7000" });
    const degraded = () => f.lines.filter((l) => l.msg?.toString().startsWith("engine serving with too few instances"));
    await f.quarantine.isolate(ia, "manual", "drain a", true);
    await assemble();
    expect(degraded()).toEqual([]); // two of three serve
    await f.quarantine.isolate(ib, "manual", "drain b", true);
    for (let i = 0; i < 3; i++) expect(await assemble()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    expect(degraded()).toMatchObject([{ engineId: "e1", serving: 1, instances: 3, threshold: 0.5 }]);
    vi.setSystemTime(T0 + 10_000);
    router.select(SESSION);
    expect(degraded()).toHaveLength(2);
  });

  it("sends any call to another instance when it never reached the first (no connection could be made)", async () => {
    const { a, b, heard, compact } = setup();
    a.behaviour = { kind: "throw", error: new EngineUnreachableError("10.0.0.1:7000: cannot connect (connection attempt failed)") };
    b.behaviour = { kind: "throw", error: new EngineUnreachableError("10.0.0.2:7000: cannot connect (connection attempt failed)") };
    // Both unreachable: tried one after the other, then legacy.
    expect(await compact()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect([a.calls.length, b.calls.length]).toEqual([1, 1]);
    expect(heard.failovers).toHaveLength(1);
  });

  it("falls back only when every instance is quarantined, and says so", async () => {
    const { ia, ib, router, heard, assemble } = setup();
    await f.quarantine.isolate(ia, "manual", "drain a", true);
    expect(router.select(SESSION)).toMatchObject({ mode: Mode.MODE_NORMAL, target: ib });
    await f.quarantine.isolate(ib, "manual", "drain b", true);
    const selection = router.select(SESSION);
    expect(selection).toMatchObject({ mode: Mode.MODE_FALLBACK, fallbackKind: "quarantined" });
    expect(selection.fallbackReason).toMatch(/^engine "e1" is quarantined \(all 2 instances\)/);
    expect(f.registry.status("e1").quarantine?.manual).toBe(true);
    expect(await assemble()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(heard.fallbacks.map((x) => x.kind)).toEqual(["quarantined"]);
  });
});
