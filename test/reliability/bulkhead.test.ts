/**
 * The per-engine bulkhead (issue 11, part 4): a slow engine saturated by many concurrent calls
 * gets at most `max_concurrent_calls` of them; the rest are answered at once by `legacy` (or
 * RESOURCE_EXHAUSTED under `on_failure: strict`), counted and logged — and sessions routed to
 * other engines are not held up meanwhile.
 *
 * Timing is asserted as order of events against an engine that takes 2 s per call (rejected and
 * other engines' calls are done before its first answer), never as tight wall-clock numbers.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { Bulkhead } from "../../src/registry/bulkhead.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { compileTsEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { registryClient } from "../helpers/registry-client.js";

const SLOW_MS = 2_000;
const SLOW_LIMIT = 4;
const STRICT_LIMIT = 2;

describe("Bulkhead", () => {
  it("admits up to the limit per engine, releases once per permit", () => {
    const limits: Record<string, number> = { a: 2, b: 1 };
    const b = new Bulkhead((id) => limits[id] ?? 64);
    const a1 = b.tryAcquire("a");
    const a2 = b.tryAcquire("a");
    expect(a1 && a2).toBeTruthy();
    expect(b.tryAcquire("a")).toBeUndefined();
    expect(b.tryAcquire("b")).toBeTruthy(); // engines are independent
    expect(b.tryAcquire("b")).toBeUndefined();
    a1!();
    a1!(); // a second release of the same permit frees nothing more
    expect(b.active("a")).toBe(1);
    expect(b.tryAcquire("a")).toBeTruthy();
    expect(b.tryAcquire("a")).toBeUndefined();
  });
});

describe("a slow engine behind its bulkhead", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const engines: Record<string, EngineProcess> = {};

  beforeAll(async () => {
    await compileTsEngine();
    contextd = await startContextd({
      config: {
        slots: { agents: { slow: "bh-slow", fast: "bh-fast", strict: "bh-strict" } },
        engines: {
          timeouts: { assemble: "10s", ingest: "5s" },
          health: { interval: "200ms", timeout: "150ms" },
          max_concurrent_calls: 64,
          overrides: {
            "bh-slow": { max_concurrent_calls: SLOW_LIMIT },
            "bh-strict": { max_concurrent_calls: STRICT_LIMIT, on_failure: "strict" },
          },
        },
      },
    });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    registry = registryClient(contextd.address);
    for (const id of ["bh-slow", "bh-fast", "bh-strict"]) {
      engines[id] = await startTsEngine({ engineId: id, registry: contextd.address, owner: "team" });
      expect((await engines[id]!.registered).ok).toBe(true);
    }
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await Promise.all(Object.values(engines).map((e) => e.kill9()));
    await contextd?.cleanup();
  });

  async function sessionFor(agentId: string, n: number) {
    const session = { sessionId: `${agentId}-${n}`, agentId };
    await cx.appendMessages({ session, messages: [user(`session ${n} of ${agentId}: hello`)] });
    return session;
  }

  it("calls over the limit fall back at once, and the other engine's sessions stay fast", async () => {
    // One after another: eight concurrent appends would already meet the limit on Ingest.
    const slowSessions: Array<{ sessionId: string; agentId: string }> = [];
    for (let n = 0; n < 8; n++) slowSessions.push(await sessionFor("slow", n));
    const fastSession = await sessionFor("fast", 0);
    const before = await registry.get("bh-slow");
    engines["bh-slow"]!.control({ assemble: "slow", slow_ms: SLOW_MS });

    // 40 concurrent Assembles on the slow engine's sessions...
    const done: Array<{ at: number; engineId: string; mode: Mode; fallbackReason: string }> = [];
    const storm = Array.from({ length: 40 }, (_, i) =>
      cx.assemble({ session: slowSessions[i % slowSessions.length]!, tokenBudget: 4_000 }).then((r) => {
        done.push({ at: Date.now(), engineId: r.engineId, mode: r.mode, fallbackReason: r.fallbackReason });
      }),
    );
    // ...and, meanwhile, sessions of another engine, one call after another.
    const fast: Array<{ at: number; engineId: string; mode: Mode }> = [];
    for (let i = 0; i < 20; i++) {
      const r = await cx.assemble({ session: fastSession, tokenBudget: 4_000 });
      fast.push({ at: Date.now(), engineId: r.engineId, mode: r.mode });
    }
    await Promise.all(storm);

    const admitted = done.filter((d) => d.engineId === "bh-slow");
    const turnedAway = done.filter((d) => d.engineId !== "bh-slow");
    expect(admitted).toHaveLength(SLOW_LIMIT);
    expect(admitted.every((d) => d.mode === Mode.MODE_NORMAL)).toBe(true);
    expect(turnedAway).toHaveLength(40 - SLOW_LIMIT);
    for (const d of turnedAway) {
      expect(d).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      expect(d.fallbackReason).toContain(`at its concurrency limit (${SLOW_LIMIT} calls in flight`);
    }
    const firstSlowAnswer = Math.min(...admitted.map((d) => d.at));
    // Turned away at once, not after waiting for a permit...
    expect(Math.max(...turnedAway.map((d) => d.at))).toBeLessThan(firstSlowAnswer);
    // ...and the other engine served all its calls while the slow one was still busy.
    expect(fast.every((f) => f.engineId === "bh-fast" && f.mode === Mode.MODE_NORMAL)).toBe(true);
    expect(Math.max(...fast.map((f) => f.at))).toBeLessThan(firstSlowAnswer);

    // Only the admitted calls reached the engine; saturation is not a failure (no quarantine).
    expect(engines["bh-slow"]!.events().filter((e) => e.event === "call" && e.op === "assemble" && e.mode === "slow")).toHaveLength(SLOW_LIMIT);
    const after = await registry.get("bh-slow");
    expect(after.quarantine).toBeUndefined();
    expect({
      calls: after.calls - before.calls,
      failures: after.failures - before.failures,
      fallbacks: after.fallbacks - before.fallbacks,
      timeouts: after.timeouts - before.timeouts,
    }).toEqual({ calls: SLOW_LIMIT, failures: 0, fallbacks: 40 - SLOW_LIMIT, timeouts: 0 });
    const warning = await contextd.waitForLog((l) => l.msg === "engine at its concurrency limit: calls turned away" && l.engineId === "bh-slow");
    expect(warning).toMatchObject({ operation: "assemble", level: 40 });
    expect(warning.rejected).toBeGreaterThanOrEqual(1);

    // The permits came back with the answers: the engine takes calls again.
    engines["bh-slow"]!.control({});
    expect(await cx.assemble({ session: slowSessions[0]!, tokenBudget: 4_000 })).toMatchObject({ engineId: "bh-slow", mode: Mode.MODE_NORMAL });
  });

  it("with on_failure: strict, calls over the limit are refused RESOURCE_EXHAUSTED at once", async () => {
    const session = await sessionFor("strict", 0);
    engines["bh-strict"]!.control({ assemble: "slow", slow_ms: SLOW_MS });
    const outcomes: Array<{ at: number; ok: boolean; err?: ServiceError }> = [];
    await Promise.all(
      Array.from({ length: 6 }, () =>
        cx.assemble({ session, tokenBudget: 4_000 }).then(
          () => outcomes.push({ at: Date.now(), ok: true }),
          (err: ServiceError) => outcomes.push({ at: Date.now(), ok: false, err }),
        ),
      ),
    );
    const served = outcomes.filter((o) => o.ok);
    const refused = outcomes.filter((o) => !o.ok);
    expect(served).toHaveLength(STRICT_LIMIT);
    expect(refused).toHaveLength(6 - STRICT_LIMIT);
    for (const o of refused) {
      expect(o.err?.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(o.err?.details).toContain("concurrency limit");
      expect(o.err?.details).toContain("on_failure: strict");
    }
    expect(Math.max(...refused.map((o) => o.at))).toBeLessThan(Math.min(...served.map((o) => o.at)));
    expect((await registry.get("bh-strict")).quarantine).toBeUndefined();
    engines["bh-strict"]!.control({});
  });
});
