/**
 * Issue 11, part 3: network partitions, not only deaths. Two sidecar engines run on their own test
 * host — a network namespace joined to this machine by a veth pair (test/helpers/netns.ts) — and
 * register themselves with a contextd listening on the host end. Then the link is cut while calls
 * are in flight, held, and restored. A cut link drops packets silently (no RST, no ICMP), so this
 * is not a death: connections stay "established", nothing fails fast, and only deadlines end calls.
 *
 * Checked: the calls in flight and the calls sent into the partition are cut at their engine
 * deadline (not earlier, not later) and answered by `legacy` in fallback mode, with a clear
 * DEADLINE_EXCEEDED / UNAVAILABLE in strict mode; the engines are quarantined; they stay so while
 * the link is down, the ejection time long over; and once the link is back they are released and
 * routed to again within a few health checks — the engines' callbacks to HostService included —
 * without restarting or re-registering anything.
 *
 * The partition is held for PARTITION_MS on purpose: by then TCP's retransmission backoff on the
 * dead connections exceeds 10 s. Before engine-channel.ts `reset` and host-client.ts
 * HOST_CHANNEL_OPTIONS, contextd's health checks and the engine's host calls waited for that
 * backoff on the old connections: routing came back about 13 s after the link (24 s after a 30 s
 * partition; up to 2 min), and the engine was quarantined again by its first host callback.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { EngineEventType, type EngineStatus } from "../../src/contract/gen/contextd/v1/registry.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { compileTsEngine } from "../helpers/engine-process.js";
import { createTestHost, namespaceUnsupported, startNamespacedEngine, type NamespacedEngine, type TestHost } from "../helpers/netns.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { watchEngines, type EngineWatch } from "./helpers/engine-watch.js";

const unsupported = namespaceUnsupported();
if (unsupported) console.warn(`partition.test.ts: SKIPPED — this machine cannot create a network namespace for the test host: ${unsupported}`);

const TIMEOUT_MS = 1_000;
/** What a cut call may take beyond its deadline: the fallback to legacy, on a loaded 2-core machine. */
const MARGIN_MS = 1_500;
/** How long the link stays cut (see the file comment). */
const PARTITION_MS = 13_000;
/** Link back → engine released: a couple of health checks, generously. */
const RECOVERY_MS = 5_000;
/** The engines answer after this: well inside the deadline, so only the partition can lose the answer. */
const SLOW_MS = 500;

const FB = "part-fb";
const STRICT = "part-strict";
const CONFIG = (host: TestHost) => ({
  listen: `${host.hostIp}:0`,
  log_level: "debug",
  slots: { context_engine: "legacy", agents: { fb: FB, strict: STRICT } },
  engines: {
    allow_endpoints: [host.nsIp],
    timeouts: { assemble: `${TIMEOUT_MS}ms`, ingest: `${TIMEOUT_MS}ms`, compact: `${TIMEOUT_MS}ms` },
    // Four failed checks (at least 2.4 s) to quarantine by health: the calls in flight, cut after 1 s,
    // are what quarantines the engines, so the reason names them.
    health: { interval: "400ms", timeout: "400ms", unhealthy_threshold: 4 },
    quarantine: { base_ejection: "1s", max_ejection: "1s" },
    on_failure: "fallback",
    overrides: { [STRICT]: { on_failure: "strict" } },
  },
});

describe.skipIf(unsupported)("a sidecar engine behind a network partition", () => {
  let host: TestHost;
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let reg: ReturnType<typeof registryClient>;
  let watch: EngineWatch;
  const engines: Record<string, NamespacedEngine> = {};
  const before: Record<string, EngineStatus> = {};
  const fb = { sessionId: "partition-fb", agentId: "fb" };
  const strict = { sessionId: "partition-strict", agentId: "strict" };
  let cutAt = 0;
  let cutMark = 0;

  beforeAll(async () => {
    [host] = await Promise.all([createTestHost(), compileTsEngine()]);
    cd = await startContextd({ config: CONFIG(host) });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 15_000 });
    reg = registryClient(cd.address);
    watch = await watchEngines(cd.address);
    for (const id of [FB, STRICT]) {
      engines[id] = await startNamespacedEngine(host, { engineId: id, registry: cd.address, owner: "team" });
      expect(await engines[id]!.registered, engines[id]!.logs()).toMatchObject({ ok: true });
    }
  }, 60_000);

  afterAll(async () => {
    watch?.close();
    cx?.close();
    reg?.close();
    await Promise.all(Object.values(engines).map((e) => e.kill9()));
    await cd?.cleanup();
    await host?.destroy();
  });

  const timed = async <T>(p: Promise<T>): Promise<{ ms: number; value?: T; error?: ServiceError }> => {
    const t0 = Date.now();
    try {
      return { value: await p, ms: Date.now() - t0 };
    } catch (err) {
      return { error: err as ServiceError, ms: Date.now() - t0 };
    }
  };
  const assemble = (session: typeof fb) => cx.assemble({ session, tokenBudget: 4_000 });
  const append = (text: string) => cx.appendMessages({ session: fb, messages: [user(text)] });
  const failedChecks = (id: string) => cd.logLines().filter((l) => l.msg === "health check failed" && l.engineId === id).length;

  it("serves both sessions through the veth before the cut", async () => {
    await append("fix the failing test");
    await cx.appendMessages({ session: strict, messages: [user("and the other one")] });
    for (const [session, id] of [
      [fb, FB],
      [strict, STRICT],
    ] as const) {
      expect(engines[id]!.address.startsWith(`${host.nsIp}:`)).toBe(true);
      expect(await assemble(session)).toMatchObject({ engineId: id, mode: Mode.MODE_NORMAL });
      before[id] = await reg.get(id);
      expect(before[id]!.endpoint).toBe(engines[id]!.address);
      expect(before[id]!.quarantine).toBeUndefined();
    }
  });

  it("cuts the calls in flight and those sent into the partition at their deadline; fallback answers, strict fails clearly", async () => {
    for (const e of Object.values(engines)) e.control({ assemble: "slow", ingest: "slow", slow_ms: SLOW_MS });
    const n: Record<string, number> = { [FB]: engines[FB]!.events().length, [STRICT]: engines[STRICT]!.events().length };
    const inFlight = [timed(assemble(fb)), timed(assemble(fb)), timed(append("sent before the cut"))];
    const strictInFlight = timed(assemble(strict));
    // The `count`th event `event` of engine `id` since `n`.
    const nth = (id: string, event: string, count: number) =>
      engines[id]!.waitForEvent(
        (_, i) =>
          engines[id]!.events()
            .slice(n[id], i + 1)
            .filter((e) => e.event === event && e.mode === "slow").length >= count,
      );
    // Cut once every one of them has reached its engine (which answers SLOW_MS later: too late).
    await Promise.all([nth(FB, "call", 3), nth(STRICT, "call", 1)]);
    cutMark = watch.mark();
    cutAt = Date.now();
    await host.cut();
    const intoPartition = [timed(assemble(fb)), timed(append("sent into the partition"))];

    const fallback = await Promise.all([...inFlight, ...intoPartition]);
    for (const r of fallback) {
      expect(r.error, "no call fails in fallback mode").toBeUndefined();
      // Waited out, not failed fast (a failed connection answers in a few ms): a partition is not a
      // death. The slack is the timers' (a deadline timer may fire a few ms before the wall clock
      // says it is due; 948 ms was seen under load), not the guarantee's.
      expect(r.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
      expect(r.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    }
    for (const r of [fallback[0]!, fallback[1]!, fallback[3]!]) {
      const ans = r.value as Awaited<ReturnType<typeof assemble>>;
      expect(ans).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      // contextd's own timer (`deadline of 1000ms exceeded`) or, a hair later, the transport's (`deadline exceeded`);
      // or, for a call whose timer was a hair behind another's, that other call's timeout: it quarantined the
      // engine, which ends the engine's calls in flight at once (their host tokens revoked).
      expect(ans.fallbackReason, ans.fallbackReason).toMatch(
        new RegExp(`^engine "${FB}" (failed on assemble: .*deadline|was quarantined \\(assemble: timeout: .*deadline)`),
      );
    }
    // The engine answered the calls in flight in time (`answered`, not `answered_late`); the partition lost the answers.
    await nth(FB, "answered", 3);
    expect(
      engines[FB]!.events()
        .slice(n[FB])
        .filter((e) => e.event === "answered_late"),
    ).toEqual([]);

    const s = await strictInFlight;
    expect(s.error?.code, String(s.error)).toBe(status.DEADLINE_EXCEEDED);
    expect(s.error?.details).toContain(`engine "${STRICT}" failed on assemble`);
    expect(s.error?.details).toContain("on_failure: strict");
    expect(s.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);

    // Every appended message is in the transcript once: the appends were durable before the engine heard of them.
    const texts: string[] = [];
    for await (const e of cx.transcript(fb.sessionId)) if (e.entry?.$case === "message") texts.push(messageText(e.entry.value));
    expect(texts).toEqual(["fix the failing test", "sent before the cut", "sent into the partition"]);
  });

  it("quarantines the engines, names the timeout, and keeps them out while the link stays down", async () => {
    for (const id of [FB, STRICT]) {
      // The first call to reach its deadline: an Assemble or (FB) the Ingest of the append.
      const q = await watch.next(cutMark, "QUARANTINED", id);
      expect(q.message).toMatch(id === FB ? /^(assemble|ingest): timeout: / : /^assemble: timeout: /);
    }
    const listed = new Map((await reg.list()).engines.map((e) => [e.engineId, e]));
    for (const id of [FB, STRICT]) {
      const e = listed.get(id)!;
      expect(e.quarantine).toMatchObject({ manual: false });
      expect(e.quarantine!.reason, e.quarantine!.reason).toMatch(new RegExp(`^timeout: engine "${id}" failed on ${e.quarantine!.operation}: .*deadline`));
      expect(e.timeouts - before[id]!.timeouts).toBeGreaterThanOrEqual(1);
    }

    // Hold the cut: health checks keep failing long after the 1 s ejection, and nothing releases
    // the engines (waiting on contextd's log lines, each a failed check).
    const target = { [FB]: failedChecks(FB) + 3, [STRICT]: failedChecks(STRICT) + 3 };
    await cd.waitForLog(
      () => Date.now() - cutAt >= PARTITION_MS && failedChecks(FB) >= target[FB]! && failedChecks(STRICT) >= target[STRICT]!,
      PARTITION_MS + 15_000,
    );
    expect(
      watch
        .events()
        .slice(cutMark)
        .filter((e) => e.type === EngineEventType.ENGINE_EVENT_TYPE_RELEASED),
    ).toEqual([]);

    // Meanwhile the runtime is answered at once, by legacy, without a call to the engine…
    const calls = (await reg.get(FB)).calls;
    const quick = await timed(assemble(fb));
    expect(quick.value).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(quick.value!.fallbackReason).toMatch(new RegExp(`engine "${FB}" is quarantined \\((assemble|ingest): timeout:`));
    expect(quick.ms).toBeLessThan(TIMEOUT_MS);
    expect((await timed(append("while quarantined"))).error).toBeUndefined();
    expect((await reg.get(FB)).calls).toBe(calls);
    // …and in strict mode with an immediate UNAVAILABLE naming the quarantine.
    const s = await timed(assemble(strict));
    expect(s.error?.code).toBe(status.UNAVAILABLE);
    expect(s.error?.details).toContain(`engine "${STRICT}" is quarantined`);
    expect(s.ms).toBeLessThan(TIMEOUT_MS);
  });

  it("routes to the engines again soon after the link comes back, host callbacks included, with nothing restarted", async () => {
    for (const e of Object.values(engines)) e.control({});
    const mark = watch.mark();
    const logMark = cd.logLines().length;
    await host.restore();
    const restoredAt = Date.now();
    const released = await Promise.all([FB, STRICT].map((id) => watch.next(mark, "RELEASED", id, RECOVERY_MS + 10_000)));
    const recoveryMs = Date.now() - restoredAt;
    console.log(`partition: link cut for ${restoredAt - cutAt} ms; both engines released ${recoveryMs} ms after it came back`);
    expect(recoveryMs).toBeLessThan(RECOVERY_MS);
    for (const r of released) expect(r.message).toContain("health check passed");

    // First a Compact: the engine does not own compaction and delegates it to HostService, over
    // its own connection back to contextd — which must not be stuck in the partition's TCP backoff.
    const compact = await cx.compact({ session: fb, tokenBudget: 4_000, force: true });
    expect(compact, compact.fallbackReason).toMatchObject({ engineId: FB, mode: Mode.MODE_NORMAL });
    // Waited for, not read at once: the nested call's access-log line is written when it ends, and
    // under load it can reach this reader after the Compact's answer (failed so in CI on Node 24).
    await eventually(
      async () =>
        cd
          .logLines()
          .slice(logMark)
          .some((l) => l.method === "DelegateCompaction" && l.msg === "ok"),
      10_000,
    );
    expect(await assemble(fb)).toMatchObject({ engineId: FB, mode: Mode.MODE_NORMAL });
    expect(await assemble(strict)).toMatchObject({ engineId: STRICT, mode: Mode.MODE_NORMAL });
    await append("after the partition");

    for (const id of [FB, STRICT]) {
      const now = await reg.get(id);
      expect(now.quarantine).toBeUndefined();
      expect(now.registeredAtMs).toBe(before[id]!.registeredAtMs); // not registered again
      expect(now.failures - before[id]!.failures).toBe(now.timeouts - before[id]!.timeouts); // only the partition's timeouts
      expect(engines[id]!.exitCode()).toBeUndefined();
    }
    expect(cd.exitCode()).toBeUndefined();
  });
});
