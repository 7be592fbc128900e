/**
 * Overload (issue 11, part 4): a storm of concurrent sessions against a real contextd with a small
 * `server.max_concurrent_calls`, on loopback. contextd must shed what it cannot take — every call
 * ends OK or RESOURCE_EXHAUSTED naming the limit, none UNAVAILABLE, INTERNAL or hung — while its
 * health check keeps answering SERVING promptly, WatchEngines streams opened mid-storm are not
 * refused, its memory stays bounded, a shed append writes nothing, and no slot is leaked (by shed,
 * answered or cancelled calls). Then, deterministically: calls held by a slow engine occupy the
 * server's slots until they end (so `server.max_concurrent_calls` must stay well above the engines'
 * bulkheads), the next call is shed at once while health and WatchEngines are not, and cancelling
 * the held calls gives the slots back.
 *
 * That a slow engine does not stall sessions routed to other engines (the per-engine bulkhead) is
 * test/reliability/bulkhead.test.ts.
 *
 * The runtimes here behave as real ones should: each session appends under an idempotency key and
 * retries a RESOURCE_EXHAUSTED answer with jittered backoff; sessions are spread over several
 * HTTP/2 connections (each capped by `server.max_concurrent_streams`, so clients also queue).
 */
import { credentials, status, type ServiceError } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AppendMessagesRequest,
  AssembleRequest,
  SessionServiceClient,
  type AppendMessagesResponse,
  type AssembleResponse,
  type DeepPartial,
} from "../../src/contract/gen/contextd/v1/session.js";
import { messageText } from "../../src/contract/messages.js";
import { CHANNEL_OPTIONS, callUnary, type UnaryMethod } from "../../src/contract/client-call.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { compileTsEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { healthCheck } from "../helpers/health.js";
import { eventually } from "../helpers/registry-client.js";
import { messageTexts, readEntries } from "../helpers/runtime-load.js";
import { parsePrometheus, sampleValue, type Sample } from "../observability/prometheus-text.js";
import { watchEngines, type EngineWatch } from "./helpers/engine-watch.js";

const LIMIT = 16;
const STREAMS_PER_CONNECTION = 32;
const CONNECTIONS = 10;
const SESSIONS = 300;
const ROUNDS = 5;
const WATCHES = 20;
const MAX_ATTEMPTS = 60;
const RSS_BOUND_MB = 600;
// Typically 0.1–0.7 s on the shared 2-core machine (see the report line); generous against its noise.
const HEALTH_BOUND_MS = 3_000;

/** One HTTP/2 connection of its own (a local subchannel pool), as separate runtimes would have. */
function connection(address: string) {
  const raw = new SessionServiceClient(address, credentials.createInsecure(), { ...CHANNEL_OPTIONS, "grpc.use_local_subchannel_pool": 1 });
  const defaults = { address, timeoutMs: 20_000 };
  return {
    append: (req: DeepPartial<AppendMessagesRequest>) =>
      callUnary(raw, raw.appendMessages as UnaryMethod<AppendMessagesRequest, AppendMessagesResponse>, AppendMessagesRequest.fromPartial(req), defaults),
    assemble: (req: DeepPartial<AssembleRequest>, signal?: AbortSignal) =>
      callUnary(raw, raw.assemble as UnaryMethod<AssembleRequest, AssembleResponse>, AssembleRequest.fromPartial(req), defaults, { signal }),
    close: () => raw.close(),
  };
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Every attempt's outcome: the code, and the details of anything but OK. */
class Outcomes {
  readonly byCode = new Map<number, number>();
  readonly details = new Map<number, Set<string>>();
  record(code: number, details = ""): void {
    this.byCode.set(code, (this.byCode.get(code) ?? 0) + 1);
    if (code !== status.OK) (this.details.get(code) ?? this.details.set(code, new Set()).get(code)!).add(details);
  }
  count(code: number): number {
    return this.byCode.get(code) ?? 0;
  }
  get total(): number {
    return [...this.byCode.values()].reduce((a, b) => a + b, 0);
  }
  summary(): Record<string, unknown> {
    return Object.fromEntries([...this.byCode].map(([c, n]) => [status[c], { n, details: [...(this.details.get(c) ?? [])].slice(0, 3) }]));
  }
}

/** Sends `fn` until it is not shed (RESOURCE_EXHAUSTED), with jittered backoff; any other error ends it. */
async function untilAdmitted<T>(outcomes: Outcomes, fn: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    try {
      const res = await fn();
      outcomes.record(status.OK);
      return res;
    } catch (err) {
      const e = err as ServiceError;
      outcomes.record(e.code ?? -1, e.details ?? String(err));
      if (e.code !== status.RESOURCE_EXHAUSTED) return undefined;
      await new Promise((r) => setTimeout(r, Math.min(200, 10 * attempt) * (0.5 + Math.random())));
    }
  }
  return undefined;
}

describe("overload: server-level load shedding", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const scrape = async (): Promise<Sample[]> => parsePrometheus(await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text());

  let engine: EngineProcess;

  beforeAll(async () => {
    await compileTsEngine();
    contextd = await startContextd({
      config: {
        server: { max_concurrent_calls: LIMIT, max_concurrent_streams: STREAMS_PER_CONNECTION },
        slots: { agents: { slow: "ov-slow" } },
        engines: { timeouts: { assemble: "60s" } },
      },
    });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 20_000 });
    engine = await startTsEngine({ engineId: "ov-slow", registry: contextd.address, owner: "team" });
    expect((await engine.registered).ok).toBe(true);
  });
  afterAll(async () => {
    cx?.close();
    await engine?.kill9();
    await contextd?.cleanup();
  });

  it("a storm of sessions: every call OK or RESOURCE_EXHAUSTED, health SERVING, memory bounded, transcripts intact", async () => {
    await cx.appendMessages({ session: { sessionId: "warm-up" }, messages: [user("warm up")] });
    const baselineMb = rssMb(contextd.pid);
    const conns = Array.from({ length: CONNECTIONS }, () => connection(contextd.address));
    const outcomes = new Outcomes();
    const acked = new Map<string, string[]>();
    const abandoned = new Map<string, string>();

    // Sampled while the storm runs (there is no event for "still responsive"): health and RSS.
    let storming = true;
    const health: Array<{ ms: number; status: string }> = [];
    let peakMb = baselineMb;
    const sampler = (async () => {
      while (storming) {
        const t = performance.now();
        const s = await healthCheck(contextd.address, 5_000).catch((err: ServiceError) => `error ${status[err.code] ?? ""} ${err.details}`);
        health.push({ ms: performance.now() - t, status: s });
        peakMb = Math.max(peakMb, rssMb(contextd.pid));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const session = async (i: number) => {
      const c = conns[i % CONNECTIONS]!;
      const sessionId = `storm-${i}`;
      const texts: string[] = [];
      acked.set(sessionId, texts);
      for (let r = 0; r < ROUNDS; r++) {
        const text = `${sessionId} round ${r}: ${"lorem ipsum ".repeat(8)}`;
        const appended = await untilAdmitted(outcomes, () =>
          c.append({ session: { sessionId, agentId: "storm" }, messages: [user(text)], idempotencyKey: `${sessionId}-${r}` }),
        );
        if (!appended) {
          abandoned.set(sessionId, text); // the runtime gives up; appends stay in order, so the session stops
          return;
        }
        texts.push(text);
        const ctx = await untilAdmitted(outcomes, () => c.assemble({ session: { sessionId, agentId: "storm" }, tokenBudget: 100_000 }));
        if (ctx) expect(ctx.messages.map(messageText)).toContain(text);
      }
    };
    const started = performance.now();
    const storm = Promise.all(Array.from({ length: SESSIONS }, (_, i) => session(i)));
    // WatchEngines streams opened while the server is at its limit: not counted, so not refused.
    const watches: EngineWatch[] = await Promise.all(Array.from({ length: WATCHES }, () => watchEngines(contextd.address)));
    await storm;
    const stormMs = performance.now() - started;
    storming = false;
    await sampler;
    for (const w of watches) w.close();
    for (const c of conns) c.close();

    const report = {
      stormMs: Math.round(stormMs),
      attempts: outcomes.total,
      outcomes: outcomes.summary(),
      abandoned: abandoned.size,
      baselineMb,
      peakMb,
      healthChecks: health.length,
      healthMaxMs: Math.round(Math.max(...health.map((h) => h.ms))),
    };
    console.log(`overload storm: ${JSON.stringify(report)}`);

    // Every call ended OK or shed — nothing UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED (hung) or other.
    expect(
      [...outcomes.byCode.keys()].filter((c) => c !== status.OK && c !== status.RESOURCE_EXHAUSTED),
      JSON.stringify(report),
    ).toEqual([]);
    expect(outcomes.count(status.RESOURCE_EXHAUSTED), "the limit was reached").toBeGreaterThan(0);
    for (const d of outcomes.details.get(status.RESOURCE_EXHAUSTED) ?? [])
      expect(d).toContain(`limit of ${LIMIT} concurrent calls (server.max_concurrent_calls)`);
    expect(outcomes.count(status.OK)).toBeGreaterThanOrEqual(SESSIONS); // most of the work got through
    expect(outcomes.total).toBeGreaterThan(2_000);

    // Responsive throughout: every health check answered SERVING, promptly.
    expect(health.length).toBeGreaterThan(0);
    for (const h of health) expect(h.status).toBe("SERVING");
    expect(Math.max(...health.map((h) => h.ms))).toBeLessThan(HEALTH_BOUND_MS);
    expect(peakMb).toBeLessThan(RSS_BOUND_MB);

    // What was acknowledged is in the transcript exactly once, in order; an abandoned (shed) append is not.
    for (const [sessionId, texts] of acked) {
      const got = texts.length === 0 && abandoned.has(sessionId) ? [] : messageTexts(await readEntries(cx, sessionId));
      expect(got, sessionId).toEqual(texts);
    }

    // Shed calls are counted (and logged, at most once a second); no slot was leaked.
    const samples = await scrape();
    // SessionService's: the sidecar's heartbeat re-registration (RegistryService) may be shed too when
    // one falls inside the storm, and that call is not one of the test's.
    expect(sampleValue(samples, "contextd_rpc_shed_total", { grpc_service: "contextd.v1.SessionService" })).toBe(outcomes.count(status.RESOURCE_EXHAUSTED));
    expect(sampleValue(samples, "grpc_server_handled_total", { grpc_service: "contextd.v1.SessionService", grpc_code: "RESOURCE_EXHAUSTED" })).toBe(
      outcomes.count(status.RESOURCE_EXHAUSTED),
    );
    expect(sampleValue(samples, "contextd_rpc_in_flight")).toBe(0);
    const warning = await contextd.waitForLog((l) => l.msg === "server at its concurrency limit: calls shed");
    expect(warning).toMatchObject({ level: 40, limit: LIMIT, key: "server.max_concurrent_calls" });
    expect(contextd.exitCode()).toBeUndefined();
  });

  it("a slow engine's calls hold server slots until they end: the next call is shed at once, health and watches are not; cancelling gives the slots back", async () => {
    const session = { sessionId: "held-by-slow", agentId: "slow" };
    await cx.appendMessages({ session, messages: [user("a message for the slow engine")] });
    engine.control({ assemble: "slow", slow_ms: 60_000 });
    const c = connection(contextd.address);
    const held = Array.from({ length: LIMIT }, () => {
      const ac = new AbortController();
      const done = c.assemble({ session, tokenBudget: 10_000 }, ac.signal).then(
        () => status.OK,
        (e: ServiceError) => e.code,
      );
      return { ac, done };
    });
    // Every slot is taken once the engine has all of them (the bulkhead, 64, is above the limit).
    await engine.waitForEvent(() => engine.events().filter((e) => e.event === "call" && e.op === "assemble" && e.mode === "slow").length >= LIMIT, 15_000);
    expect(sampleValue(await scrape(), "contextd_rpc_in_flight")).toBe(LIMIT);

    // At the limit: a call to a healthy session is refused at once, unprocessed...
    const t = performance.now();
    const refused = await cx.appendMessages({ session: { sessionId: "at-the-limit" }, messages: [user("not written")] }).then(
      () => undefined,
      (e: ServiceError) => e,
    );
    expect(performance.now() - t).toBeLessThan(HEALTH_BOUND_MS);
    expect(refused?.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(refused?.details).toContain(`limit of ${LIMIT} concurrent calls (server.max_concurrent_calls)`);
    // ...while health answers and a WatchEngines stream opens (neither counts against the limit).
    expect(await healthCheck(contextd.address)).toBe("SERVING");
    const watch = await watchEngines(contextd.address);
    watch.close();

    // The runtime gives up on the held calls: their slots come back (the server hears of it after the client).
    for (const h of held) h.ac.abort();
    expect(await Promise.all(held.map((h) => h.done))).toEqual(held.map(() => status.CANCELLED));
    c.close();
    await eventually(async () => sampleValue(await scrape(), "contextd_rpc_in_flight") === 0, 10_000);
    engine.control({});
    // The full limit is available again, and the refused append wrote nothing.
    const again = await Promise.allSettled(
      Array.from({ length: LIMIT }, (_, i) => cx.appendMessages({ session: { sessionId: `after-${i}` }, messages: [user("again")] })),
    );
    expect(again.filter((r) => r.status === "rejected")).toEqual([]);
    expect((await cx.getSession({ session: { sessionId: "at-the-limit" } }).catch((e: ServiceError) => e)) as ServiceError).toMatchObject({
      code: status.NOT_FOUND,
    });
  });
});
