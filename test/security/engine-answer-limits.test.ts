/**
 * Findings on what engines send (issue 26):
 * - "engine answers have no size cap": a 40 MB Assemble answer kept contextd at 100 % CPU for
 *   minutes (decoded, counted, validated on the event loop). Now an answer over what its request
 *   justifies (engines.answer_limits: its budget, or the request's own size) is a contract
 *   violation found on its wire bytes before it is decoded (src/registry/answer-limits.ts):
 *   legacy answers, the engine is quarantined, health checks keep being answered.
 * - "engine-supplied text is stored and echoed unbounded": 1 MB ids in kept_entry_ids, with raw
 *   ESC, BEL and right-to-left overrides, were copied verbatim into the tenant's fallback_reason
 *   and the persisted quarantine reason every runtime reads. Now every engine string that is stored
 *   or echoed (ids, reasons, error text) is cut short and its control characters escaped.
 * - "WatchEngines streams are unbounded": a watcher that does not read has its stream ended once
 *   it is MAX_WATCH_BACKLOG events behind, instead of contextd holding every event for it.
 *
 * Real contextd, the real TypeScript test engine (test/engines/ts/misbehaving-engine.ts) in its
 * `huge` and `hostile_text` modes.
 */
import { status, type ClientReadableStream } from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { EngineEventType, type WatchEnginesResponse } from "../../src/contract/gen/contextd/v1/registry.js";
import { MAX_WATCH_BACKLOG } from "../../src/registry/registry-service.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { healthLoop } from "../helpers/health.js";
import { eventually, refusal, registryClient } from "../helpers/registry-client.js";
import { startScopedHostEngine } from "./fixtures/scoped-host-engine-process.js";

/** Characters that act on a terminal instead of showing. */
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
/** A health check must wait less than this (before: the server did not answer for minutes). */
const HEALTH_BOUND_MS = 1_000;

describe("what an engine sends is bounded before contextd works on it", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let engine: EngineProcess;
  let registry: ReturnType<typeof registryClient>;

  beforeAll(async () => {
    cd = await startContextd({ config: { slots: { context_engine: "answers" }, engines: { timeouts: { assemble: "60s", compact: "60s" } } } });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 120_000 });
    registry = registryClient(cd.address);
    engine = await startTsEngine({ engineId: "answers", registry: cd.address, owner: "team", ownsCompaction: true });
    expect((await engine.registered).ok).toBe(true);
  }, 60_000);
  afterEach(async () => {
    engine.control({});
    const quarantined = (await registry.get("answers")).quarantine;
    if (quarantined) await registry.clear("answers");
  });
  afterAll(async () => {
    registry?.close();
    cx?.close();
    await engine?.stop();
    await cd?.cleanup();
  });

  const session = (id: string) => ({ sessionId: id });
  const seed = (id: string) => cx.appendMessages({ session: session(id), messages: [user("hello"), user("a question")] });

  it("a 40 MB Assemble answer is refused on its size before it is decoded: legacy answers, the engine is quarantined, health keeps answering", async () => {
    await seed("huge-assemble");
    engine.control({ assemble: "huge" });
    const health = healthLoop(cd.address);
    await health.answered(2);
    const before = health.latencies.length;
    const res = await cx.assemble({ session: session("huge-assemble"), tokenBudget: 10_000 });
    const during = (await health.stop()).slice(before);
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toMatch(/its Assemble answer is \d+ bytes, over the \d+ its request allows \(engines\.answer_limits\)/);
    expect(res.messages.map((m) => m.content[0]?.block)).toHaveLength(2);
    expect((await registry.get("answers")).quarantine?.reason).toContain("engines.answer_limits");
    expect(Math.max(...during), `health latencies ${during.map(Math.round)}`).toBeLessThan(HEALTH_BOUND_MS);
  }, 120_000);

  it("a Compact answer with a 40 MB summary is refused the same way, and nothing is committed", async () => {
    await seed("huge-compact");
    engine.control({ compact: "huge" });
    const res = await cx.compact({ session: session("huge-compact"), tokenBudget: 1_000, force: true });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain("its Compact answer is");
    expect(res.result?.summary ?? "").not.toMatch(/^s{1000}/);
  }, 120_000);

  it("a 1 MB kept_entry_id of terminal escapes reaches neither the fallback reason nor the quarantine reason raw or whole", async () => {
    await seed("hostile-ids");
    engine.control({ assemble: "hostile_text" });
    const res = await cx.assemble({ session: session("hostile-ids"), tokenBudget: 10_000 });
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain("kept_entry_ids[0]");
    expect(res.fallbackReason).toContain("\\u001b[8m\\u0007\\u202e");
    expect(res.fallbackReason).toContain("(1000000 characters)");
    expect(res.fallbackReason).not.toMatch(RAW_CONTROL);
    expect(res.fallbackReason.length).toBeLessThan(2_000);
    const reason = (await registry.get("answers")).quarantine!.reason;
    expect(reason).not.toMatch(RAW_CONTROL);
    expect(reason.length).toBeLessThan(2_000);
  });

  it("an engine's long error text and Compact reason are cut short and escaped in what the runtime hears", async () => {
    await seed("hostile-error");
    // 100 kB: a 1 MB reason would be over what a Compact answer may carry (the test above).
    engine.control({ compact: "hostile_text", hostile_bytes: 100_000 });
    const compacted = await cx.compact({ session: session("hostile-error"), tokenBudget: 1_000, force: true });
    expect(compacted.reason).not.toMatch(RAW_CONTROL);
    expect(compacted.reason.length).toBeLessThan(2_000);
    expect(compacted).toMatchObject({ engineId: "answers", ok: false, compacted: false });
    expect(compacted.reason).toContain("\\u001b[8m");
    expect(compacted.reason).toContain("(100000 characters)");

    // 4 kB: gRPC carries error text in HTTP/2 trailers, which hold a few kB at most.
    engine.control({ ingest: "hostile_text", hostile_bytes: 4_000 });
    // Ingest failing is logged, the append stands; the failure's text is what the quarantine keeps.
    await cx.appendMessages({ session: session("hostile-error"), messages: [user("more")] });
    const reason = await eventually(async () => (await registry.get("answers")).quarantine?.reason);
    expect(reason).toContain("failed on ingest");
    expect(reason).toContain("\\u001b[8m\\u0007\\u202ehidden");
    expect(reason).not.toMatch(RAW_CONTROL);
    expect(reason.length).toBeLessThan(2_000);
  });

  it("a watcher that stops reading has its WatchEngines stream ended once it is too far behind", async () => {
    const stream: ClientReadableStream<WatchEnginesResponse> = registry.raw.watchEngines({ includeCurrent: false });
    let received = 0;
    stream.on("data", () => {
      received++;
      if (received === 1) stream.pause(); // reads one event, then nothing more
    });
    stream.on("error", () => undefined);
    // grpc-js reports the status only once the stream is read to its end: resumed below.
    const ended = new Promise<{ code: number; details: string }>((resolve) => stream.on("status", resolve));
    await registry.isolate("answers", "the first event");
    await registry.clear("answers");
    // Each quarantine and release is an event: the transport holds a few hundred (HTTP/2 flow
    // control), contextd the rest — until MAX_WATCH_BACKLOG of them.
    const events = 2 * MAX_WATCH_BACKLOG;
    for (let i = 0; i < events / 2; i++) {
      await registry.isolate("answers", `round ${i}`);
      await registry.clear("answers");
    }
    stream.resume();
    const end = await ended;
    expect(end.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(end.details).toContain(`fell ${MAX_WATCH_BACKLOG} events behind`);
    expect(received).toBeLessThan(events);
    // Everyone else still watches and reads.
    const other = registry.raw.watchEngines({ includeCurrent: true });
    other.on("error", () => undefined);
    const first = await new Promise<WatchEnginesResponse>((resolve) => other.once("data", resolve));
    expect(first.event?.type).toBe(EngineEventType.ENGINE_EVENT_TYPE_REGISTERED);
    other.cancel();
  }, 120_000);

  it.each([
    ["a right-to-left override", "\u202eenigne lufsselmrah", "holds control, bidi or zero-width characters"],
    ["terminal escapes", "\u001b[8mhidden\u0007", "holds control, bidi or zero-width characters"],
    ["10,000 characters", "n".repeat(10_000), "name is 10000 characters, over 128"],
  ])("an EngineInfo name with %s, which every runtime would read, is refused at admission", async (_what, name, problem) => {
    const hostile = await startScopedHostEngine({ engineId: "named", registry: cd.address, owner: "team", requirements: [], name });
    try {
      const outcome = await hostile.registered;
      expect(outcome.ok).toBe(false);
      expect(outcome.message).toContain(`GetInfo: name`);
      expect(outcome.message).toContain(problem);
      expect(outcome.message).not.toMatch(RAW_CONTROL);
      expect(outcome.message.length).toBeLessThan(500);
      expect((await refusal(registry.get("named"))).code).toBe(status.NOT_FOUND);
    } finally {
      await hostile.stop();
    }
  });
});
