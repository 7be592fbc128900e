/**
 * Issue 11, part 1: crash safety and exactly-once.
 *
 * - contextd is SIGKILLed again and again (on SQLite, then on PostgreSQL) while four runtimes append
 *   under idempotency keys, retrying every failed call with the same key until it is answered, and
 *   compactions are in flight (helpers/crash-load.ts). It restarts each time on the same address,
 *   so the clients simply reconnect. After the last restart every message is there exactly once, in
 *   each writer's order, no entry is half-written, every compaction is whole or absent, and Assemble
 *   answers the active view.
 * - A sidecar engine that owns compaction is SIGKILLed while its Compact is in flight: the runtime
 *   gets legacy's answer (on_failure: fallback) or a clear UNAVAILABLE (strict); the transcript has
 *   that whole compaction or none; the engine, restarted on the same address, is admitted and serves.
 * - A delegating engine dies after the host committed its DelegateCompaction but before it answered:
 *   the runtime is told of that compaction (fallback mode), not "not compacted" from legacy's attempt.
 *
 * Kills wait for progress (a random number of further acknowledged appends, and a compaction call
 * in flight), not for time.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, describe, expect, it } from "vitest";
import { EngineHealth } from "../../src/contract/gen/contextd/v1/registry.js";
import type { CompactResponse } from "../../src/contract/gen/contextd/v1/session.js";
import { Mode, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { compileTsEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { registryClient } from "../helpers/registry-client.js";
import { readEntries } from "../helpers/runtime-load.js";
import { createScratchDatabase } from "../helpers/scratch-postgres.js";
import { CrashLoad, verifySession } from "./helpers/crash-load.js";

const KILLS = 5;
const cleanup: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => undefined);
});

// Small thresholds, so that nearly every Compact and every small-budget Assemble commits a compaction.
const COMPACTION = { keep_recent_tokens: 60, reserve_tokens: 0, summary_max_chars: 1_500 };

async function crashLoop(store: string | undefined, prefix: string): Promise<void> {
  const address = `127.0.0.1:${await getFreePort()}`;
  // A fixed listen address, kept by every restart (restart() reuses the options and the data dir).
  const config = { listen: address, compaction: COMPACTION, ...(store ? { store } : {}) };
  let cd: ContextdProcess = await startContextd({ config });
  const processes = [cd];
  cleanup.push(async () => {
    for (const p of processes.reverse()) await p.cleanup();
  });
  const load = new CrashLoad({ client: () => new ContextdClient({ address }), prefix, compactBudget: 2_000, assembleBudget: 300 });
  cleanup.push(async () => load.close());
  load.start();

  let killedMidCompaction = 0;
  for (let k = 0; k < KILLS; k++) {
    const target = load.acked() + 8 + Math.floor(Math.random() * 25);
    await load.until(
      () => load.acked() >= target && load.compactionsInFlight() > 0,
      `${target} appends are acknowledged and a compaction is in flight (kill ${k + 1})`,
    );
    killedMidCompaction += load.compactionsInFlight() > 0 ? 1 : 0;
    await cd.kill9();
    cd = await cd.restart();
    processes.push(cd);
    expect(cd.address).toBe(address);
  }
  // The runtimes get through to the last process: more appends and compactions are answered.
  const [acked, compacted] = [load.acked() + 10, load.compactionsAcked() + 3];
  await load.until(() => load.acked() >= acked && load.compactionsAcked() >= compacted, "appends and compactions are answered after the last restart");
  await load.finish();
  expect(load.stats.failures, "no call finally failed").toEqual([]);

  const reader = new ContextdClient({ address });
  cleanup.push(async () => reader.close());
  const figures = [];
  for (const sessionId of load.sessionIds) figures.push(await verifySession(reader, load, sessionId));
  const replayed = load.writers.reduce((n, w) => n + w.acked.filter((a) => a.replayed).length, 0);
  expect(killedMidCompaction).toBe(KILLS);
  expect(
    figures.every((f) => f.compactions > 0),
    "every session was compacted",
  ).toBe(true);
  expect(
    figures.some((f) => f.pointers > 0),
    "some compactions kept messages (their first-kept pointers were checked)",
  ).toBe(true);
  console.info(
    `[crash-safety ${prefix}] ${KILLS} kills (all with a compaction in flight); ${load.acked()} appends acknowledged (${replayed} answered as replays), ` +
      `${load.compactionsAcked()} compactions acknowledged, ${figures.reduce((n, f) => n + f.compactions, 0)} committed (${figures.reduce((n, f) => n + f.pointers, 0)} keeping messages); ${load.stats.retries} retries`,
  );
}

describe("contextd SIGKILLed under keyed appends and compactions", () => {
  it("SQLite: every message exactly once, in order; every compaction whole or absent", () => crashLoop(undefined, "sqlite"));

  it("PostgreSQL: every message exactly once, in order; every compaction whole or absent", async () => {
    const db = await createScratchDatabase();
    cleanup.push(() => db.drop());
    await crashLoop(db.url({ pool_max: 4 }), "pg");
  });
});

/** Turns long enough that a summary makes the view smaller (a compaction that would not is not committed). */
const longAnswer = (i: number) =>
  // The last turn stays short, so it fits keep_recent_tokens and is what the compaction keeps.
  i < 5 ? `answer ${i}: ${"the parser reads each key, checks its type and range, and reports the first bad one with its path. ".repeat(8)}` : `answer ${i}`;

describe("a sidecar engine SIGKILLed mid-Compact", () => {
  const engines: EngineProcess[] = [];
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;

  afterAll(async () => {
    cx?.close();
    registry?.close();
    await Promise.all(engines.map((e) => e.kill9()));
    await cd?.cleanup();
  });

  const compactions = (entries: TranscriptEntry[]) =>
    entries.flatMap((e) => (e.entry?.$case === "compaction" ? [{ id: e.id, seq: e.seq, ...e.entry.value }] : []));

  /** Whole: a summary, and a first-kept pointer to an earlier message of the session. */
  function expectWhole(entries: TranscriptEntry[]): void {
    for (const c of compactions(entries)) {
      expect(c.summary).not.toBe("");
      const kept = entries.find((e) => e.id === c.firstKeptEntryId);
      expect(kept?.entry?.$case).toBe("message");
      expect(kept!.seq).toBeLessThan(c.seq);
    }
  }

  async function scenario(engineId: string, agentId: string, strict: boolean): Promise<void> {
    const listen = `127.0.0.1:${await getFreePort()}`;
    const start = async () => {
      const e = await startTsEngine({
        engineId,
        listen,
        registry: cd.address,
        owner: "team",
        ownsCompaction: true,
        control: { compact: "slow", slow_ms: 60_000 },
      });
      engines.push(e);
      expect((await e.registered).ok).toBe(true);
      return e;
    };
    const engine = await start();
    const session = { sessionId: `mid-compact-${engineId}`, agentId };
    for (let i = 0; i < 6; i++)
      await cx.appendMessages({ session, messages: [user(`question ${i} about src/file${i}.ts`), assistant(longAnswer(i))], idempotencyKey: `t${i}` });

    const answer: Promise<{ res?: CompactResponse; err?: ServiceError }> = cx.compact({ session, tokenBudget: 4_000, force: true }).then(
      (res) => ({ res }),
      (err: ServiceError) => ({ err }),
    );
    await engine.waitForEvent((e) => e.event === "call" && e.op === "compact");
    await engine.kill9();
    const outcome = await answer;
    const entries = await readEntries(cx, session.sessionId);
    expectWhole(entries);
    // Nothing the killed engine made is committed; the fallback's compaction is there whole, once.
    if (strict) {
      expect(outcome.err?.code, JSON.stringify(outcome)).toBe(status.UNAVAILABLE);
      expect(outcome.err?.details).toContain(`engine "${engineId}" failed on compact`);
      expect(outcome.err?.details).toContain("on_failure: strict");
      expect(compactions(entries)).toEqual([]);
    } else {
      const res = outcome.res!;
      expect(res, JSON.stringify(outcome)).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, compacted: true });
      expect(res.fallbackReason).toContain(`engine "${engineId}" failed on compact`);
      expect(compactions(entries).map((c) => [c.engineId, c.summary, c.firstKeptEntryId])).toEqual([
        ["legacy", res.result!.summary, res.result!.firstKeptEntryId],
      ]);
    }

    // The failed call quarantined it (so that its admission below is what ends the quarantine).
    expect((await registry.get(engineId)).quarantine?.operation).toBe("compact");

    // Restarted on the same address, it registers again, which admits it and ends its quarantine.
    const again = await start();
    again.control({});
    const status_ = await registry.get(engineId);
    expect({ health: status_.health, quarantine: status_.quarantine, endpoint: status_.endpoint }).toEqual({
      health: EngineHealth.ENGINE_HEALTH_SERVING,
      quarantine: undefined,
      endpoint: listen,
    });
    const res = await cx.compact({ session, tokenBudget: 4_000, force: true });
    expect(res).toMatchObject({ engineId, mode: Mode.MODE_NORMAL, compacted: true, fallbackReason: "" });
    const after = await readEntries(cx, session.sessionId);
    expectWhole(after);
    const latest = compactions(after).at(-1)!;
    expect([latest.engineId, latest.summary]).toEqual([engineId, "test summary"]);
    expect(compactions(after)).toHaveLength(strict ? 1 : 2);
    const ctx = await cx.assemble({ session, tokenBudget: 4_000 });
    expect(ctx).toMatchObject({ engineId, mode: Mode.MODE_NORMAL });
    expect(isSummaryMessage(ctx.messages[0]!) && ctx.messages[0]!.id).toBe(latest.id);
  }

  it("fallback: legacy answers; the transcript has the whole compaction; the restarted engine serves", async () => {
    await compileTsEngine();
    cd = await startContextd({
      config: {
        compaction: { keep_recent_tokens: 20, reserve_tokens: 0 },
        slots: {
          context_engine: "legacy",
          agents: { fallback: "owner-fb", strict: "owner-strict", delegating: "delegate-fb", "delegating-strict": "delegate-strict" },
        },
        engines: { overrides: { "owner-strict": { on_failure: "strict" }, "delegate-strict": { on_failure: "strict" } } },
      },
    });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 20_000 });
    registry = registryClient(cd.address);
    await scenario("owner-fb", "fallback", false);
  });

  it("strict: a clear UNAVAILABLE; no compaction; the restarted engine serves", () => scenario("owner-strict", "strict", true));

  it("a delegating engine killed after the host committed its compaction: the runtime hears that compaction, once", async () => {
    const engineId = "delegate-fb";
    const engine = await startTsEngine({ engineId, registry: cd.address, owner: "team", control: { compact: "crash_after" } });
    engines.push(engine);
    expect((await engine.registered).ok).toBe(true);
    const session = { sessionId: "killed-after-delegating", agentId: "delegating" };
    for (let i = 0; i < 6; i++)
      await cx.appendMessages({ session, messages: [user(`question ${i} about src/file${i}.ts`), assistant(longAnswer(i))], idempotencyKey: `t${i}` });
    const res = await cx.compact({ session, tokenBudget: 4_000, force: true });
    await engine.waitForEvent((e) => e.event === "crashing_after" && e.op === "compact");
    const entries = await readEntries(cx, session.sessionId);
    expectWhole(entries);
    // One compaction, the engine's own (committed through DelegateCompaction before it died), and
    // the answer says so instead of "not compacted" from legacy's conflicting attempt.
    const committed = compactions(entries);
    expect(committed.map((c) => c.engineId)).toEqual([engineId]);
    expect(res, JSON.stringify(res)).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK, compacted: true });
    expect(res.fallbackReason).toContain(`engine "${engineId}" failed on compact`);
    expect(res.reason).toContain(`compacted through DelegateCompaction by engine "${engineId}" before it failed`);
    expect([res.result?.summary, res.result?.firstKeptEntryId]).toEqual([committed[0]!.summary, committed[0]!.firstKeptEntryId]);

    // Strict: the call fails, and its status names the compaction that landed all the same.
    const strictSession = { sessionId: "killed-after-delegating-strict", agentId: "delegating-strict" };
    for (let i = 0; i < 6; i++)
      await cx.appendMessages({ session: strictSession, messages: [user(`q ${i} about src/f${i}.ts`), assistant(longAnswer(i))], idempotencyKey: `t${i}` });
    const strictEngine = await startTsEngine({ engineId: "delegate-strict", registry: cd.address, owner: "team", control: { compact: "crash_after" } });
    engines.push(strictEngine);
    expect((await strictEngine.registered).ok).toBe(true);
    const failed = await cx.compact({ session: strictSession, tokenBudget: 4_000, force: true }).then(
      () => undefined,
      (e: ServiceError) => e,
    );
    const landed = compactions(await readEntries(cx, strictSession.sessionId));
    expect(landed.map((c) => c.engineId)).toEqual(["delegate-strict"]);
    expect(failed?.code).toBe(status.UNAVAILABLE);
    expect(failed?.details).toContain(`its DelegateCompaction had already committed compaction ${landed[0]!.id}`);
  });
});
