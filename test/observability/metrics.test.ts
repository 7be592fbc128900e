/**
 * Prometheus metrics on `metrics_listen`, scraped from a real contextd after real calls: a sidecar
 * that serves, then fails (quarantined, answered by legacy), appends, compactions and store
 * operations, each series checked for its value; /healthz and /readyz; no session id in any label.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { type ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import type { EngineProcess } from "../helpers/engine-process.js";
import { startContextdWithEngine, type ContextdWithEngine } from "../helpers/contextd-with-engine.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { parsePrometheus, sampleValue, type Sample } from "./prometheus-text.js";

const ENGINE = "metered";

describe("Prometheus metrics", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;
  let fixture: ContextdWithEngine;
  const scrape = async (): Promise<Sample[]> => parsePrometheus(await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text());

  beforeAll(async () => {
    fixture = await startContextdWithEngine(ENGINE, {
      engines: { timeouts: { assemble: "2s" }, health: { interval: "200ms", timeout: "150ms" }, quarantine: { base_ejection: "60s", max_ejection: "60s" } },
      compaction: { keep_recent_tokens: 200 },
    });
    ({ contextd, engine, cx } = fixture);
  });
  afterAll(() => fixture?.close());

  it("serves /healthz and /readyz, and the process metrics", async () => {
    expect(contextd.metricsAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    const healthz = await fetch(`http://${contextd.metricsAddress}/healthz`);
    expect(healthz.status).toBe(200);
    const readyz = await fetch(`http://${contextd.metricsAddress}/readyz`);
    expect(readyz.status).toBe(200);
    expect(await readyz.text()).toBe("ready\n");
    expect((await fetch(`http://${contextd.metricsAddress}/nope`)).status).toBe(404);
    const samples = await scrape();
    expect(sampleValue(samples, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(sampleValue(samples, "nodejs_eventloop_lag_seconds")).toBeDefined();
  });

  it("counts RPCs, engine calls, fallbacks, quarantine, appends, compactions and store operations", async () => {
    const session = { sessionId: "metered-session-1" };
    const conversation = codingSession({ turns: 4, seed: 5 }).messages;
    const appended = await cx.appendMessages({ session, messages: conversation });
    await cx.appendMessages({ session: { sessionId: "metered-session-2" }, messages: [textMessage(Role.ROLE_USER, "hello")] });
    const served = await cx.assemble({ session, tokenBudget: 100_000 });
    expect(served.engineId).toBe(ENGINE);

    engine.control({ assemble: "throw" });
    const fallback = await cx.assemble({ session, tokenBudget: 100_000 });
    expect(fallback.engineId).toBe("legacy");
    await eventually(async () => (await registryClient(contextd.address).get(ENGINE)).quarantine !== undefined, 10_000);
    const compacted = await cx.compact({ session, tokenBudget: 100_000, force: true });
    expect(compacted.compacted).toBe(true);

    const samples = await scrape();
    const rpc = (method: string, code = "OK") =>
      sampleValue(samples, "grpc_server_handled_total", { grpc_service: "contextd.v1.SessionService", grpc_method: method, grpc_code: code });
    expect(rpc("AppendMessages")).toBe(2);
    expect(rpc("Assemble")).toBe(2);
    expect(rpc("Compact")).toBe(1);
    expect(
      sampleValue(samples, "grpc_server_handled_total", { grpc_service: "contextd.v1.RegistryService", grpc_method: "RegisterEngine", grpc_code: "OK" }),
    ).toBe(1);
    expect(sampleValue(samples, "grpc_server_handling_seconds_count", { grpc_service: "contextd.v1.SessionService", grpc_method: "Assemble" })).toBe(2);
    expect(sampleValue(samples, "grpc_server_handling_seconds_sum", { grpc_method: "Assemble" })).toBeGreaterThan(0);

    expect(sampleValue(samples, "contextd_engine_calls_total", { engine: ENGINE, operation: "assemble", outcome: "ok" })).toBe(1);
    expect(sampleValue(samples, "contextd_engine_calls_total", { engine: ENGINE, operation: "assemble", outcome: "error" })).toBe(1);
    expect(sampleValue(samples, "contextd_engine_calls_total", { engine: "legacy", operation: "assemble", outcome: "ok" })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(samples, "contextd_engine_call_duration_seconds_count", { engine: ENGINE, operation: "assemble" })).toBe(2);
    // The failed Assemble and the Compact while quarantined were answered by legacy.
    expect(sampleValue(samples, "contextd_engine_fallbacks_total", { engine: ENGINE, operation: "assemble", reason: "error" })).toBe(1);
    expect(sampleValue(samples, "contextd_engine_fallbacks_total", { engine: ENGINE, operation: "compact", reason: "quarantined" })).toBe(1);
    expect(sampleValue(samples, "contextd_engine_quarantined", { engine: ENGINE })).toBe(1);
    expect(sampleValue(samples, "contextd_engine_quarantined", { engine: "legacy" })).toBe(0);
    expect(sampleValue(samples, "contextd_engine_health", { engine: ENGINE })).toBe(1);

    expect(sampleValue(samples, "contextd_compactions_total", { engine: "legacy", outcome: "committed" })).toBe(1);
    expect(sampleValue(samples, "contextd_compaction_tokens_before_total", { engine: "legacy" })).toBe(compacted.result!.tokensBefore);
    expect(sampleValue(samples, "contextd_compaction_tokens_after_total", { engine: "legacy" })).toBe(compacted.result!.tokensAfter);
    expect(sampleValue(samples, "contextd_compaction_duration_seconds_count", { engine: "legacy" })).toBe(1);

    expect(sampleValue(samples, "contextd_appended_messages_total")).toBe(conversation.length + 1);
    expect(sampleValue(samples, "contextd_appended_tokens_total")).toBe(
      appended.tokenCounts.reduce((a, b) => a + b, 0) + (await cx.getSession({ session: { sessionId: "metered-session-2" } })).info!.totalTokens,
    );
    expect(sampleValue(samples, "contextd_store_operation_duration_seconds_count", { operation: "appendMessages" })).toBe(2);
    expect(sampleValue(samples, "contextd_store_operation_duration_seconds_count", { operation: "readActiveView" })).toBeGreaterThanOrEqual(3);
    // Counted at most every 2 s: an earlier scrape may still be cached.
    await eventually(async () => sampleValue(await scrape(), "contextd_sessions") === 2, 10_000);

    // Bounded labels: never a session id.
    for (const s of samples) for (const v of Object.values(s.labels)) expect(v).not.toContain("metered-session");
  });

  it("a refused call is counted with its code", async () => {
    await expect(cx.assemble({ session: { sessionId: "nobody" }, tokenBudget: 10 })).rejects.toMatchObject({ code: 5 });
    const samples = await scrape();
    expect(sampleValue(samples, "grpc_server_handled_total", { grpc_method: "Assemble", grpc_code: "NOT_FOUND" })).toBe(1);
  });

  it("/readyz says 503 while contextd drains", async () => {
    const draining = await startContextd({ config: { health: { drain_delay: "5s" } } });
    try {
      expect((await fetch(`http://${draining.metricsAddress}/readyz`)).status).toBe(200);
      const exited = draining.stop("SIGTERM");
      await draining.waitForLog((l) => l.msg === "contextd draining: health NOT_SERVING");
      const res = await fetch(`http://${draining.metricsAddress}/readyz`);
      expect(res.status).toBe(503);
      expect(await res.text()).toContain("draining");
      expect((await fetch(`http://${draining.metricsAddress}/healthz`)).status).toBe(200);
      await exited;
    } finally {
      await draining.cleanup();
    }
  });
});
