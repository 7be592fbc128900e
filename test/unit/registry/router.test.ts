/**
 * Router (src/registry/router.ts), in process: the real Router with its real collaborators — an
 * EngineRegistry, HostGrants, and a Quarantine over a SQLite file as its failure observer — calling
 * engines written in the test against the ContextEngine interface (registry-fixture.ts). Fake timers
 * drive every deadline, so nothing here waits on the wall clock. The same paths against real
 * sidecars over gRPC: test/registry/routing.test.ts and the integration tests.
 */
import { status } from "@grpc/grpc-js";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { CallContext, ContextEngine } from "../../../src/contract/engine-api.js";
import {
  CancelledError,
  ContextdError,
  ContractViolation,
  DeadlineExceededError,
  ResourceExhaustedError,
  UnauthenticatedError,
} from "../../../src/contract/errors.js";
import { ContextEngineServiceCompactRequest, type ContextEngineServiceCompactResponse } from "../../../src/contract/gen/contextd/v1/engine.js";
import { EngineEventType } from "../../../src/contract/gen/contextd/v1/registry.js";
import { Mode, SelectionSource } from "../../../src/contract/gen/contextd/v1/types.js";
import { HostGrants } from "../../../src/registry/host-grants.js";
import {
  observeAll,
  type EngineCallEnd,
  type EngineCallObserver,
  type EngineCallOutcome,
  type EngineFallback,
  type EngineOperation,
  type FallbackKind,
} from "../../../src/registry/engine-call-observer.js";
import { engineCounters } from "../../../src/registry/engine-counters.js";
import { CallerDeadlineError, type CallerContext } from "../../../src/registry/engine-dispatch.js";
import { Router, type RoutingSettings } from "../../../src/registry/router.js";
import { addSidecar, NO_DEADLINE, registryFixture, ScriptedEngine, SESSION, T0, TIMEOUTS } from "../registry-fixture.js";

const BASE_EJECTION = 30_000;
const COMPACT_MS = TIMEOUTS.compact;

/** What the metrics and tracing hooks would hear: how each engine call ended, and each fallback. */
class HeardCalls implements EngineCallObserver {
  readonly endings: Array<{ engineId: string; op: EngineOperation; outcome: EngineCallOutcome }> = [];
  readonly fallbacks: Array<{ selectedId: string; op: EngineOperation; kind: FallbackKind }> = [];
  around<T>(
    _id: string,
    _op: EngineOperation,
    trace: Record<string, string> | undefined,
    call: (t: Record<string, string> | undefined) => Promise<T>,
  ): Promise<T> {
    return call(trace);
  }
  ended(c: EngineCallEnd): void {
    this.endings.push({ engineId: c.engine.id, op: c.op, outcome: c.outcome });
  }
  fellBack({ selectedId, op, kind }: EngineFallback): void {
    this.fallbacks.push({ selectedId, op, kind });
  }
}

let f: ReturnType<typeof registryFixture>;

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
  f = registryFixture({ baseEjectionMs: BASE_EJECTION, maxEjectionMs: 10 * BASE_EJECTION });
});

afterEach(async () => {
  vi.useRealTimers();
  await f.close();
});

/** A router whose slot names `e1` (registered, a ScriptedEngine) unless `settings` says otherwise. */
function setup(settings: Partial<RoutingSettings> = {}) {
  const e1 = new ScriptedEngine("e1");
  const registered = addSidecar(f.registry, e1);
  const grants = new HostGrants("127.0.0.1:7070");
  const heard = new HeardCalls();
  const routing: RoutingSettings = {
    contextEngine: "e1",
    agents: {},
    timeoutsMs: TIMEOUTS,
    onFailure: "fallback",
    maxConcurrentCalls: 8,
    fallbackReserveMs: 0,
    overrides: {},
    ...settings,
  };
  const router = new Router(f.registry, routing, grants, observeAll(engineCounters, f.quarantine, heard));
  const compact = (caller: CallerContext = NO_DEADLINE, validate?: (v: ContextEngineServiceCompactResponse) => void) =>
    router.call(router.select(SESSION), "compact", caller, (engine: ContextEngine, ctx: CallContext) => engine.compact(compactRequest(), ctx), validate);
  return { e1, registered, grants, heard, router, compact };
}

function compactRequest(): ContextEngineServiceCompactRequest {
  return ContextEngineServiceCompactRequest.fromPartial({ session: SESSION, tokenBudget: 1_000 });
}

describe("Router: selection", () => {
  it("routes to the engine the slot names, under its deadline, with a host token for the call", async () => {
    const { e1, registered, router, compact } = setup();
    const selection = router.select(SESSION);
    expect(selection).toMatchObject({ selectedId: "e1", source: SelectionSource.SELECTION_SOURCE_CONFIGURED, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    expect(selection.target).toBe(registered);

    const routed = await compact();
    expect(routed).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL, fallbackReason: "", value: { reason: "e1: nothing to compact" } });
    expect(e1.calls).toHaveLength(1);
    expect(e1.calls[0]!.ctx.deadlineMs).toBe(T0 + COMPACT_MS);
    expect(e1.calls[0]!.ctx.host).toMatchObject({ endpoint: "127.0.0.1:7070", expiresAtMs: T0 + COMPACT_MS });
    expect(routed.grant).toMatchObject({ engineId: "e1", sessionId: "s1", ended: true });
    expect(registered.counters).toEqual({ calls: 1, failures: 0, fallbacks: 0, fallbacksByReason: {}, timeouts: 0 });
    expect(f.legacyEngine.calls).toEqual([]);
  });

  it("a slot naming an unregistered engine is answered by legacy, saying why", async () => {
    const { router, heard, compact } = setup({ agents: { main: "e2" } });
    expect(router.select(SESSION)).toMatchObject({ selectedId: "e2", source: SelectionSource.SELECTION_SOURCE_CONFIGURED, mode: Mode.MODE_FALLBACK });

    const routed = await compact();
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, fallbackReason: 'engine "e2" is not registered' });
    expect(routed.value.reason).toBe("legacy: nothing to compact");
    expect(f.legacyEngine.calls[0]!.ctx.host).toBeUndefined(); // in process: no host token
    expect(heard.fallbacks).toEqual([{ selectedId: "e2", op: "compact", kind: "not_registered" }]);
  });

  it("the default slot is legacy itself: normal mode, default source", () => {
    const { router } = setup({ contextEngine: "legacy" });
    expect(router.select(SESSION)).toMatchObject({ selectedId: "legacy", source: SelectionSource.SELECTION_SOURCE_DEFAULT, mode: Mode.MODE_NORMAL });
  });
});

describe("Router: an engine that fails", () => {
  it("an error: quarantined with the operation, answered by legacy, and the next call goes straight to legacy", async () => {
    const { e1, registered, router, heard, compact } = setup();
    e1.behaviour = { kind: "throw", error: new Error("boom") };
    const routed = await compact();
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, fallbackReason: 'engine "e1" failed on compact: boom' });
    expect(routed.value.reason).toBe("legacy: nothing to compact");
    expect(routed.failedGrant).toMatchObject({ engineId: "e1", ended: true });
    expect(registered.quarantine).toEqual({
      operation: "compact",
      reason: 'error: engine "e1" failed on compact: boom',
      failedAtMs: T0,
      releaseAtMs: T0 + BASE_EJECTION,
      ejections: 1,
      manual: false,
    });
    expect(registered.counters).toEqual({ calls: 1, failures: 1, fallbacks: 1, fallbacksByReason: { error: 1 }, timeouts: 0 });
    expect(f.seenEvents.map((e) => e.type)).toEqual([EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED]);
    expect(heard.endings).toEqual([
      { engineId: "e1", op: "compact", outcome: "error" },
      { engineId: "legacy", op: "compact", outcome: "ok" },
    ]);

    const quarantined = 'engine "e1" is quarantined (compact: error: engine "e1" failed on compact: boom)';
    expect(router.select(SESSION)).toMatchObject({ mode: Mode.MODE_FALLBACK, fallbackReason: quarantined });
    e1.behaviour = { kind: "answer" };
    expect(await compact()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, fallbackReason: quarantined });
    expect(e1.calls).toHaveLength(1); // not called while quarantined
  });

  it("a CancelledError the engine raises while the caller is still there is the engine's failure", async () => {
    const { e1, registered, compact } = setup();
    e1.behaviour = { kind: "throw", error: new CancelledError("the engine gave up by itself") };
    const routed = await compact();
    expect(routed).toMatchObject({
      engineId: "legacy",
      mode: Mode.MODE_FALLBACK,
      fallbackReason: 'engine "e1" failed on compact: the engine gave up by itself',
    });
    expect(registered.quarantine).toMatchObject({ operation: "compact", ejections: 1 });
    expect(registered.counters).toEqual({ calls: 1, failures: 1, fallbacks: 1, fallbacksByReason: { error: 1 }, timeouts: 0 });
  });

  it("a selection made before the engine failed (Bootstrap, then Compact) does not call it again", async () => {
    const { e1, router } = setup();
    const selection = router.select(SESSION);
    e1.behaviour = { kind: "throw", error: new Error("bootstrap broke") };
    await router.call(selection, "ingest", NO_DEADLINE, (engine, ctx) => engine.ingest({ session: SESSION, isHeartbeat: false }, ctx));
    e1.behaviour = { kind: "answer" };
    const routed = await router.call(selection, "compact", NO_DEADLINE, (engine, ctx) => engine.compact(compactRequest(), ctx));
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(routed.fallbackReason).toContain('engine "e1" is quarantined (ingest:');
    expect(e1.calls.map((c) => c.op)).toEqual(["ingest"]);
  });

  it("released after its ejection time by a passing health check, it is routed to again; failing again ejects it for twice as long", async () => {
    const { e1, registered, router, compact } = setup();
    e1.behaviour = { kind: "throw", error: new Error("boom") };
    await compact();
    vi.setSystemTime(T0 + BASE_EJECTION);
    expect(await f.quarantine.releaseIfDue(registered)).toBe(true);
    expect(router.select(SESSION)).toMatchObject({ mode: Mode.MODE_NORMAL, fallbackReason: "" });

    e1.behaviour = { kind: "answer" };
    expect(await compact()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    e1.behaviour = { kind: "throw", error: new Error("boom again") };
    expect(await compact()).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(registered.quarantine).toMatchObject({ ejections: 2, releaseAtMs: Date.now() + 2 * BASE_EJECTION });
  });

  it("a ContractViolation from the validate hook quarantines it; legacy's answer, which passes, is the one returned", async () => {
    const { registered, heard, compact } = setup();
    const routed = await compact(NO_DEADLINE, (answer) => {
      if (answer.reason.startsWith("e1")) throw new ContractViolation("first_kept_entry_id is not an entry of the view");
    });
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, value: { reason: "legacy: nothing to compact" } });
    expect(registered.quarantine?.reason).toBe('contract: engine "e1" failed on compact: first_kept_entry_id is not an entry of the view');
    expect(heard.endings.map((c) => c.outcome)).toEqual(["contract", "ok"]);
  });

  it("when legacy fails too, its error is the answer", async () => {
    const { e1, registered, compact } = setup();
    e1.behaviour = { kind: "throw", error: new Error("boom") };
    f.legacyEngine.behaviour = { kind: "throw", error: new ContextdError(status.INTERNAL, "legacy broke") };
    await expect(compact()).rejects.toThrow("legacy broke");
    expect(registered.quarantine).toBeDefined();
    expect(f.registry.legacy.quarantine).toBeUndefined();
  });
});

describe("Router: deadlines", () => {
  it("a hung engine: its deadline passes, its signal is aborted, it is quarantined for a timeout and legacy answers", async () => {
    const { e1, registered, heard, compact } = setup();
    e1.behaviour = { kind: "hang" };
    const call = compact();
    await vi.advanceTimersByTimeAsync(COMPACT_MS);
    const routed = await call;
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(routed.fallbackReason).toBe(`engine "e1" failed on compact: engine "e1" compact: deadline of ${COMPACT_MS}ms exceeded`);
    await vi.runOnlyPendingTimersAsync(); // the call under way is told in the next turn (deadline.ts)
    expect(e1.calls[0]!.abortReason).toBeInstanceOf(DeadlineExceededError);
    expect(registered.quarantine?.reason).toMatch(/^timeout: /);
    expect(registered.counters).toEqual({ calls: 1, failures: 1, fallbacks: 1, fallbacksByReason: { timeout: 1 }, timeouts: 1 });
    expect(heard.endings.map((c) => c.outcome)).toEqual(["timeout", "ok"]);
  });

  it("an answer after the deadline is dropped, and the host token it was given is dead", async () => {
    const { e1, grants, compact } = setup();
    e1.behaviour = { kind: "hold" };
    const call = compact();
    await vi.advanceTimersByTimeAsync(COMPACT_MS);
    expect((await call).value.reason).toBe("legacy: nothing to compact");
    e1.release(); // the late answer: nobody hears it
    const token = e1.calls[0]!.ctx.host!.token;
    expect(() => grants.verify(token, "s1", "ReadTranscript", { peer: "127.0.0.1:40000" })).toThrow(UnauthenticatedError);
    expect(() => grants.verify(token, "s1", "ReadTranscript", { peer: "127.0.0.1:40000" })).toThrow("the engine call that carried it has ended");
  });

  it("a per-engine timeout override bounds the call instead of the global one", async () => {
    const { e1, router, compact } = setup({ overrides: { e1: { timeoutsMs: { compact: 100 } } } });
    expect(router.timeoutMs("e1", "compact")).toBe(100);
    expect(router.timeoutMs("e1", "assemble")).toBe(TIMEOUTS.assemble);
    e1.behaviour = { kind: "hang" };
    const call = compact();
    await vi.advanceTimersByTimeAsync(100);
    expect((await call).fallbackReason).toContain("deadline of 100ms exceeded");
  });

  it("an engine answering DEADLINE_EXCEEDED before any deadline passed has failed like any other", async () => {
    const { e1, registered, compact } = setup();
    e1.behaviour = { kind: "throw", error: new DeadlineExceededError("its own upstream timed out") };
    const routed = await compact({ deadlineMs: T0 + 1_000 });
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(registered.quarantine?.reason).toBe('timeout: engine "e1" failed on compact: its own upstream timed out');
  });

  it("the runtime's own deadline passing first is the caller's doing: no quarantine, no fallback", async () => {
    const { e1, registered, heard, compact } = setup();
    e1.behaviour = { kind: "hang" };
    const call = compact({ deadlineMs: T0 + 1_000 });
    const settled = expect(call).rejects.toThrow(CallerDeadlineError);
    await vi.advanceTimersByTimeAsync(1_000);
    await settled;
    await expect(call).rejects.toThrow("(the runtime's own deadline)");
    await vi.runOnlyPendingTimersAsync(); // the call under way is told in the next turn (deadline.ts)
    expect(e1.calls[0]!.abortReason).toBeInstanceOf(DeadlineExceededError);
    expect(registered.quarantine).toBeUndefined();
    expect(registered.counters).toEqual({ calls: 1, failures: 0, fallbacks: 0, fallbacksByReason: {}, timeouts: 0 });
    expect(f.legacyEngine.calls).toEqual([]);
    expect(heard.endings.map((c) => c.outcome)).toEqual(["cancelled"]);
  });
});

describe("Router: the reserve kept for legacy's answer (engines.fallback_reserve)", () => {
  const RESERVE = 1_000;

  it("a hung engine gets the runtime's deadline less the reserve; legacy answers before the runtime's deadline, and the engine is not quarantined for it", async () => {
    const { e1, registered, heard, compact } = setup({ fallbackReserveMs: RESERVE, timeoutsMs: { ...TIMEOUTS, compact: 10_000 } });
    e1.behaviour = { kind: "hang" };
    // The runtime allows 4 s, less than compact's own 10 s: the engine's share is 3 s.
    const call = compact({ deadlineMs: T0 + 4_000 });
    expect(e1.calls[0]!.ctx.deadlineMs).toBe(T0 + 3_000);
    await vi.advanceTimersByTimeAsync(3_000);
    const routed = await call;
    expect(Date.now()).toBe(T0 + 3_000);
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(routed.fallbackReason).toMatch(/^engine "e1" did not answer compact within the runtime's deadline less the time kept for legacy's answer/);
    expect(registered.quarantine).toBeUndefined();
    expect(registered.counters).toEqual({ calls: 1, failures: 0, fallbacks: 1, fallbacksByReason: { short: 1 }, timeouts: 0 });
    expect(heard.endings.map((c) => c.outcome)).toEqual(["short", "ok"]);
    expect(heard.fallbacks).toEqual([{ selectedId: "e1", op: "compact", kind: "short" }]);
  });

  it("when the engine's own deadline comes first, missing it is its fault: quarantined for a timeout, and legacy answers", async () => {
    const { e1, registered, compact } = setup({ fallbackReserveMs: RESERVE });
    e1.behaviour = { kind: "hang" };
    const call = compact({ deadlineMs: T0 + 60_000 });
    expect(e1.calls[0]!.ctx.deadlineMs).toBe(T0 + COMPACT_MS);
    await vi.advanceTimersByTimeAsync(COMPACT_MS);
    expect(await call).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(registered.quarantine?.reason).toMatch(/^timeout: /);
    expect(registered.counters).toEqual({ calls: 1, failures: 1, fallbacks: 1, fallbacksByReason: { timeout: 1 }, timeouts: 1 });
  });

  it("the reserve is never more than half of what the runtime left", async () => {
    const { e1, compact } = setup({ fallbackReserveMs: RESERVE });
    e1.behaviour = { kind: "hang" };
    const call = compact({ deadlineMs: T0 + 600 });
    expect(e1.calls[0]!.ctx.deadlineMs).toBe(T0 + 300);
    await vi.advanceTimersByTimeAsync(300);
    expect(await call).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
  });

  it("a strict slot keeps no reserve: the engine has the runtime's whole deadline", async () => {
    const { e1, compact } = setup({ fallbackReserveMs: RESERVE, onFailure: "strict" });
    e1.behaviour = { kind: "hang" };
    const call = compact({ deadlineMs: T0 + 4_000 });
    const settled = expect(call).rejects.toThrow(CallerDeadlineError);
    expect(e1.calls[0]!.ctx.deadlineMs).toBe(T0 + 4_000);
    await vi.advanceTimersByTimeAsync(4_000);
    await settled;
  });

  it("calls routed while the engine is quarantined are counted on it as fallbacks, by reason", async () => {
    const { e1, registered, heard, compact } = setup();
    e1.behaviour = { kind: "throw", error: new Error("boom") };
    await compact();
    await compact();
    await compact();
    expect(registered.counters).toEqual({ calls: 1, failures: 1, fallbacks: 3, fallbacksByReason: { error: 1, quarantined: 2 }, timeouts: 0 });
    expect(heard.fallbacks.map((f) => f.kind)).toEqual(["error", "quarantined", "quarantined"]);
  });
});

describe("Router: an engine that loses its standing while its call runs", () => {
  it("quarantined meanwhile: the call ends at once and legacy answers; its host token is refused; its late answer is dropped", async () => {
    const { e1, registered, grants, heard, compact } = setup();
    e1.behaviour = { kind: "hold" };
    const call = compact({ deadlineMs: T0 + 60_000 });
    await vi.advanceTimersByTimeAsync(10);
    const token = e1.calls[0]!.ctx.host!.token;
    expect(grants.revokeEngine("e1", "quarantined", 'engine "e1" was quarantined (manual: maintenance)')).toBe(1);
    const routed = await call;
    expect(Date.now()).toBe(T0 + 10);
    expect(routed).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, fallbackReason: 'engine "e1" was quarantined (manual: maintenance)' });
    expect(() => grants.verify(token, "s1", "ReadTranscript", { peer: "127.0.0.1:40000" })).toThrow('host token revoked: engine "e1" was quarantined');
    e1.release(); // its answer comes now: nobody hears it
    expect(heard.endings.map((c) => c.outcome)).toEqual(["revoked", "ok"]);
    expect(heard.fallbacks.map((f) => f.kind)).toEqual(["quarantined"]);
    // Not this call's failure: counted as a fallback, not against the engine.
    expect(registered.counters).toMatchObject({ calls: 1, failures: 0, fallbacks: 1 });
    expect(registered.quarantine).toBeUndefined(); // (the fixture's Quarantine was not asked; contextd's was)
  });

  it("deregistered meanwhile under on_failure strict: UNAVAILABLE, saying so", async () => {
    const { e1, grants, compact } = setup({ onFailure: "strict" });
    e1.behaviour = { kind: "hold" };
    const call = compact({ deadlineMs: T0 + 60_000 });
    const settled = expect(call).rejects.toMatchObject({ code: status.UNAVAILABLE, message: 'engine "e1" was deregistered (on_failure: strict, no fallback)' });
    await vi.advanceTimersByTimeAsync(10);
    grants.revokeEngine("e1", "deregistered", 'engine "e1" was deregistered');
    await settled;
    e1.release();
  });

  it("only the engine's own calls: another engine's token stays good", async () => {
    const { e1, grants, compact } = setup();
    e1.behaviour = { kind: "hold" };
    const call = compact({ deadlineMs: T0 + 60_000 });
    await vi.advanceTimersByTimeAsync(10);
    expect(grants.revokeEngine("someone-else", "quarantined", "x")).toBe(0);
    const token = e1.calls[0]!.ctx.host!.token;
    expect(grants.verify(token, "s1", "ReadTranscript", { peer: "127.0.0.1:40000" }).engineId).toBe("e1");
    e1.release();
    expect(await call).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
  });
});

describe("Router: the caller's cancellation", () => {
  it("is not held against the engine: CANCELLED, the engine's signal aborted, no quarantine, no fallback", async () => {
    const { e1, registered, heard, compact } = setup();
    e1.behaviour = { kind: "hang" };
    const caller = new AbortController();
    const call = compact({ deadlineMs: Number.POSITIVE_INFINITY, signal: caller.signal });
    caller.abort();
    await expect(call).rejects.toThrow(CancelledError);
    expect(e1.calls[0]!.abortReason).toBeInstanceOf(CancelledError);
    expect(registered.quarantine).toBeUndefined();
    expect(registered.counters).toEqual({ calls: 1, failures: 0, fallbacks: 0, fallbacksByReason: {}, timeouts: 0 });
    expect(f.legacyEngine.calls).toEqual([]);
    expect(f.seenEvents).toEqual([]);
    expect(heard.endings.map((c) => c.outcome)).toEqual(["cancelled"]);
  });

  it("a caller already gone gets no engine call made for it", async () => {
    const { e1, registered, compact } = setup();
    const caller = new AbortController();
    caller.abort();
    await expect(compact({ deadlineMs: Number.POSITIVE_INFINITY, signal: caller.signal })).rejects.toThrow(CancelledError);
    expect(e1.calls).toEqual([]);
    expect(registered.quarantine).toBeUndefined();
  });
});

describe("Router: on_failure strict", () => {
  it("fails the call instead of falling back; the engine is still quarantined", async () => {
    const { e1, registered, compact } = setup({ onFailure: "strict" });
    e1.behaviour = { kind: "throw", error: new Error("boom") };
    const err = await compact().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContextdError);
    expect((err as ContextdError).code).toBe(status.UNAVAILABLE);
    expect((err as ContextdError).message).toBe('engine "e1" failed on compact: boom (on_failure: strict, no fallback)');
    expect(registered.quarantine?.operation).toBe("compact");
    expect(registered.counters.fallbacks).toBe(0);
    expect(f.legacyEngine.calls).toEqual([]);

    // Quarantined, the strict slot answers UNAVAILABLE without calling anyone.
    await expect(compact()).rejects.toMatchObject({ code: status.UNAVAILABLE, message: expect.stringContaining('engine "e1" is quarantined') as unknown });
    expect(e1.calls).toHaveLength(1);
    expect(f.legacyEngine.calls).toEqual([]);
  });

  it("a timeout fails it with DEADLINE_EXCEEDED; set per engine by an override", async () => {
    const { e1, compact } = setup({ overrides: { e1: { onFailure: "strict" } } });
    e1.behaviour = { kind: "hang" };
    const call = compact();
    const settled = expect(call).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    await vi.advanceTimersByTimeAsync(COMPACT_MS);
    await settled;
    expect(f.legacyEngine.calls).toEqual([]);
  });

  it("an unregistered engine in a strict slot fails the call", async () => {
    const { compact } = setup({ contextEngine: "e2", onFailure: "strict" });
    await expect(compact()).rejects.toMatchObject({ code: status.UNAVAILABLE, message: 'engine "e2" is not registered (on_failure: strict, no fallback)' });
  });
});

describe("Router: the bulkhead", () => {
  it("a call over the concurrency limit is answered by legacy at once, without quarantine; the permit comes back", async () => {
    const { e1, registered, compact } = setup({ maxConcurrentCalls: 1 });
    e1.behaviour = { kind: "hold" };
    const first = compact();
    const second = await compact();
    expect(second).toMatchObject({
      engineId: "legacy",
      mode: Mode.MODE_FALLBACK,
      fallbackReason: 'engine "e1" is at its concurrency limit (1 calls in flight, engines.max_concurrent_calls)',
    });
    expect(e1.holding).toBe(1);
    expect(registered.quarantine).toBeUndefined();
    expect(registered.counters).toEqual({ calls: 1, failures: 0, fallbacks: 1, fallbacksByReason: { rejected: 1 }, timeouts: 0 });
    expect(f.lines.find((l) => l.msg === "engine at its concurrency limit: calls turned away")).toMatchObject({ engineId: "e1", rejected: 1 });

    e1.release();
    expect(await first).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
    e1.behaviour = { kind: "answer" };
    expect(await compact()).toMatchObject({ engineId: "e1", mode: Mode.MODE_NORMAL });
  });

  it("with on_failure strict it is RESOURCE_EXHAUSTED, naming the override that set the limit", async () => {
    const { e1, registered, compact } = setup({ overrides: { e1: { maxConcurrentCalls: 1, onFailure: "strict" } } });
    e1.behaviour = { kind: "hold" };
    const first = compact();
    const err = await compact().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResourceExhaustedError);
    expect((err as Error).message).toBe(
      'engine "e1" is at its concurrency limit (1 calls in flight, engines.overrides.e1.max_concurrent_calls) (on_failure: strict, no fallback)',
    );
    expect(registered.quarantine).toBeUndefined();
    e1.release();
    await first;
  });
});
