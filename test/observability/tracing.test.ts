/**
 * Tracing end to end: a runtime's W3C `traceparent` continues through contextd into the engine call
 * and the engine's HostService callback — one trace, runtime → contextd → sidecar (SDK) → contextd —
 * exported over OTLP/HTTP to a receiver the test starts. Without `tracing.otlp_endpoint` nothing is
 * exported, and the runtime's trace context still reaches the engine.
 */
import { Metadata } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import type { EngineProcess } from "../helpers/engine-process.js";
import { startContextdWithEngine, type ContextdWithEngine } from "../helpers/contextd-with-engine.js";
import { startWindowEngine, type WindowEngineProcess } from "../engines-window/window-process.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { startOtlpReceiver, type OtlpReceiver } from "./otlp-receiver.js";

const ENGINE = "traced";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const RUNTIME_SPAN = "00f067aa0ba902b7";

function traceparent(): Metadata {
  const md = new Metadata();
  md.set("traceparent", `00-${TRACE_ID}-${RUNTIME_SPAN}-01`);
  return md;
}

describe("a trace spans runtime → contextd → sidecar → HostService callback", () => {
  let receiver: OtlpReceiver;
  let engine: EngineProcess;
  let cx: ContextdClient;
  let fixture: ContextdWithEngine;
  const session = { sessionId: "traced-1" };

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    fixture = await startContextdWithEngine(ENGINE, {
      tracing: { otlp_endpoint: receiver.endpoint, service_name: "contextd-under-test" },
      compaction: { keep_recent_tokens: 200 },
    });
    ({ engine, cx } = fixture);
    await cx.appendMessages({ session, messages: codingSession({ turns: 4, seed: 9 }).messages });
  });
  afterAll(async () => {
    await fixture?.close();
    await receiver?.close();
  });

  it("Compact: the RPC span continues the runtime's trace, the engine call is its child, and the engine's DelegateCompaction callback is the engine call's child", async () => {
    const res = await cx.compact({ session, tokenBudget: 50_000, force: true }, { metadata: traceparent() });
    expect(res).toMatchObject({ engineId: ENGINE, compacted: true });

    const rpc = await receiver.waitForSpan((s) => s.name === "contextd.v1.SessionService/Compact" && s.traceId === TRACE_ID);
    expect(rpc).toMatchObject({ parentSpanId: RUNTIME_SPAN, kind: 2, service: "contextd-under-test" });
    expect(rpc.attributes).toMatchObject({
      "rpc.system": "grpc",
      "rpc.service": "contextd.v1.SessionService",
      "rpc.method": "Compact",
      "contextd.engine_id": ENGINE,
      "contextd.mode": "NORMAL",
    });

    const call = await receiver.waitForSpan((s) => s.name === `engine ${ENGINE} compact` && s.traceId === TRACE_ID);
    expect(call).toMatchObject({ parentSpanId: rpc.spanId, kind: 3 });
    expect(call.attributes).toMatchObject({ "contextd.engine_id": ENGINE, "contextd.operation": "compact" });

    const callback = await receiver.waitForSpan((s) => s.name === "contextd.v1.HostService/DelegateCompaction" && s.traceId === TRACE_ID);
    expect(callback.parentSpanId).toBe(call.spanId);
  });

  it("a fallback is on the span: mode FALLBACK with its reason, the failed engine call marked as an error", async () => {
    engine.control({ assemble: "throw" });
    const res = await cx.assemble({ session, tokenBudget: 50_000 }, { metadata: traceparent() });
    expect(res.engineId).toBe("legacy");
    const rpc = await receiver.waitForSpan(
      (s) => s.name === "contextd.v1.SessionService/Assemble" && s.traceId === TRACE_ID && s.attributes["contextd.mode"] === "FALLBACK",
    );
    expect(String(rpc.attributes["contextd.fallback_reason"])).toContain("failed on assemble");
    const failed = await receiver.waitForSpan((s) => s.name === `engine ${ENGINE} assemble` && s.parentSpanId === rpc.spanId);
    expect(failed.status?.code).toBe(2);
    const legacy = await receiver.waitForSpan((s) => s.name === "engine legacy assemble" && s.parentSpanId === rpc.spanId);
    expect(legacy.traceId).toBe(TRACE_ID);
  });
});

describe("the Python sample engine (window) hands the trace on to its HostService callback", () => {
  let receiver: OtlpReceiver;
  let contextd: ContextdProcess;
  let window: WindowEngineProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    contextd = await startContextd({
      config: { slots: { context_engine: "window" }, tracing: { otlp_endpoint: receiver.endpoint }, compaction: { keep_recent_tokens: 200 } },
    });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
    window = await startWindowEngine({ registry: contextd.address, owner: "team" });
    await eventually(
      async () =>
        (
          await registryClient(contextd.address)
            .get("window")
            .catch(() => undefined)
        )?.endpoint === window.address,
      30_000,
    );
  });
  afterAll(async () => {
    cx?.close();
    await window?.stop().catch(() => undefined);
    await contextd?.cleanup();
    await receiver?.close();
  });

  it("Compact through window: DelegateCompaction is a child of contextd's engine call span", async () => {
    const session = { sessionId: "traced-window" };
    await cx.appendMessages({ session, messages: codingSession({ turns: 4, seed: 4 }).messages });
    const res = await cx.compact({ session, tokenBudget: 50_000, force: true }, { metadata: traceparent() });
    expect(res).toMatchObject({ engineId: "window", compacted: true });
    const call = await receiver.waitForSpan((s) => s.name === "engine window compact" && s.traceId === TRACE_ID);
    const callback = await receiver.waitForSpan((s) => s.name === "contextd.v1.HostService/DelegateCompaction" && s.traceId === TRACE_ID);
    expect(callback.parentSpanId).toBe(call.spanId);
  });
});

describe("without tracing.otlp_endpoint", () => {
  let cx: ContextdClient;
  let fixture: ContextdWithEngine;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    fixture = await startContextdWithEngine(ENGINE);
    ({ cx } = fixture);
  });
  afterAll(async () => {
    await fixture?.close();
    await receiver?.close();
  });

  it("exports nothing (the no-op tracer), and calls work as before", async () => {
    const session = { sessionId: "untraced-1" };
    await cx.appendMessages({ session, messages: codingSession({ turns: 4, seed: 2 }).messages });
    const res = await cx.compact({ session, tokenBudget: 50_000, force: true }, { metadata: traceparent() });
    expect(res).toMatchObject({ engineId: ENGINE, compacted: true });
    expect(receiver.spans()).toEqual([]);
  });
});
