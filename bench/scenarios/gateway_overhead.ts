/**
 * gateway_overhead: what one Assemble through contextd to a sidecar engine costs, against the floor
 * for one gRPC hop and against calling the sidecar directly.
 *
 * Variants (interleaved batches, same payload: a 20-message coding session, ~6k tokens, ~25 kB):
 * - echo: a bare grpc-js echo server in its own process; the client encodes the 20 messages with
 *   the contract's ts-proto codec, the server sends the bytes back undecoded, the client decodes them.
 * - direct: ContextEngineService.Assemble on the pass-through sidecar (bench/engines/passthrough.ts)
 *   with the 20 messages in the request; it answers them.
 * - contextd: SessionService.Assemble (budget 32k, no compaction needed) on a contextd whose slot
 *   selects the pass-through sidecar: contextd reads the view from SQLite, calls the sidecar with it,
 *   validates the answer and returns it — two hops.
 * - contextd_legacy (not part of the goals): the same Assemble on a session whose agent is routed to
 *   the built-in legacy engine — one hop, i.e. what contextd costs without the sidecar hop.
 * Latency at concurrency 1 (p50, p99 over every call of the measured batches); throughput in closed
 * loop at concurrency 16 and 64 (median over the measured windows). One client process, one channel
 * per server.
 */
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { echoClient, echoPayload, engineClient, registryClient, sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { startBenchEngine, startEchoServer } from "../harness/engines.js";
import { closedLoop, interleave, type Variant } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import { readCpuMs, selfCpuMs } from "../harness/rss.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { median, nowMs, ratio, round, summarize } from "../harness/stats.js";
import * as E from "../../src/contract/gen/contextd/v1/engine.js";

const BUDGET = 32_000;
const SESSION = { sessionId: "gateway-1", agentId: "bench" };
/** The same messages in a session of an agent routed to the built-in engine (one hop). */
const LEGACY_SESSION = { sessionId: "gateway-legacy", agentId: "bench-legacy" };

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const q = ctx.quick;
  const latency = { rounds: q ? 3 : 10, calls: q ? 80 : 300 };
  const load = { rounds: q ? 2 : 6, windowMs: q ? 700 : 2000 };
  const totalSteps = 4 * (1 + latency.rounds) + 2 * 4 * (1 + load.rounds);
  let steps = 0;
  const step = (phase: string) => ctx.progress.update(++steps, totalSteps, phase);

  ctx.progress.update(0, totalSteps, "starting echo, contextd, pass-through engine");
  const echo = await startEchoServer();
  const cd = await startContextd({ config: { slots: { context_engine: "passthrough", agents: { "bench-legacy": "legacy" } } } });
  const engine = await startBenchEngine("passthrough", cd.address, "passthrough");
  const session = sessionClient(cd.address);
  const direct = engineClient((await registryEndpoint(cd.address, "passthrough")) ?? "");
  const echoC = echoClient(echo.address);
  try {
    await session.appendMessages({ session: SESSION, messages: codingMessages({ count: 20, seed: 1 }) });
    await session.appendMessages({ session: LEGACY_SESSION, messages: codingMessages({ count: 20, seed: 1 }) });
    const first = await session.assemble({ session: SESSION, tokenBudget: BUDGET });
    if (first.engineId !== "passthrough" || first.mode !== Mode.MODE_NORMAL) {
      throw new Error(`contextd answered from ${first.engineId} (mode ${first.mode}, ${first.fallbackReason}), not the pass-through engine`);
    }
    const view = first.messages;
    const legacyFirst = await session.assemble({ session: LEGACY_SESSION, tokenBudget: BUDGET });
    if (legacyFirst.engineId !== "legacy" || legacyFirst.messages.length !== view.length)
      throw new Error(`the legacy session answered from ${legacyFirst.engineId} with ${legacyFirst.messages.length} messages`);
    const directReq = E.ContextEngineServiceAssembleRequest.fromPartial({ session: SESSION, messages: view, tokenBudget: BUDGET });
    const payload = echoPayload(view);
    const payloadBytes = E.ContextEngineServiceAssembleResponse.encode(payload).finish().length;
    let notPassthrough = 0;
    const calls: Record<string, () => Promise<unknown>> = {
      echo: () => echoC.echo(payload),
      direct: () => direct.assemble(directReq),
      contextd: () =>
        session.assemble({ session: SESSION, tokenBudget: BUDGET }).then((a) => {
          if (a.engineId !== "passthrough") notPassthrough++;
        }),
      contextd_legacy: () => session.assemble({ session: LEGACY_SESSION, tokenBudget: BUDGET }),
    };
    const names = Object.keys(calls);

    const lat = await interleave<number[]>(
      names.map((name): Variant<number[]> => ({
        name,
        batch: async () => {
          const out: number[] = [];
          for (let i = 0; i < latency.calls; i++) {
            const s = nowMs();
            await calls[name]();
            out.push(nowMs() - s);
          }
          return out;
        },
      })),
      { rounds: latency.rounds, onBatch: () => step("latency, concurrency 1") },
    );
    const lat1 = Object.fromEntries(names.map((n) => [n, summarize(lat[n].flat())]));

    const rps: Record<number, Record<string, number>> = {};
    // CPU time of every process of the comparison (bench client, echo server, contextd, sidecar)
    // per successful call in a window: what a call costs the machine, whatever else runs on it.
    const cpuPerCall: Record<number, Record<string, number>> = {};
    const cpuOf = () => selfCpuMs() + readCpuMs(echo.pid) + readCpuMs(cd.pid) + readCpuMs(engine.pid);
    const contextdCpu: number[] = [];
    const errors: string[] = [];
    for (const c of [16, 64]) {
      const windows = await interleave(
        names.map((name) => ({
          name,
          batch: async () => {
            const cpu0 = cpuOf();
            const cd0 = readCpuMs(cd.pid);
            const w = await closedLoop(calls[name], c, { durationMs: load.windowMs });
            if (name === "contextd") contextdCpu.push(((readCpuMs(cd.pid) - cd0) * 1000) / Math.max(1, w.ok));
            return { ...w, cpuUsPerCall: ((cpuOf() - cpu0) * 1000) / Math.max(1, w.ok) };
          },
        })),
        { rounds: load.rounds, onBatch: () => step(`throughput, concurrency ${c}`) },
      );
      rps[c] = Object.fromEntries(names.map((n) => [n, median(windows[n].map((w) => w.rps))]));
      cpuPerCall[c] = Object.fromEntries(names.map((n) => [n, median(windows[n].map((w) => w.cpuUsPerCall))]));
      for (const n of names) for (const w of windows[n]) if (w.errors) errors.push(`${n} c${c}: ${w.errors} errors (${w.errorSamples.join("; ")})`);
    }

    const m = (v: number) => round(v, 3);
    const metrics: Record<string, unknown> = {
      p50_ratio_vs_echo: round(ratio(lat1.contextd.p50, lat1.echo.p50), 2),
      rps_ratio_vs_echo_c64: round(ratio(rps[64].contextd, rps[64].echo), 3),
      p50_ratio_vs_direct: round(ratio(lat1.contextd.p50, lat1.direct.p50), 2),
      rps_ratio_vs_echo_c16: round(ratio(rps[16].contextd, rps[16].echo), 3),
      rps_ratio_vs_direct_c64: round(ratio(rps[64].contextd, rps[64].direct), 3),
      p50_ms: Object.fromEntries(names.map((n) => [n, m(lat1[n].p50)])),
      p99_ms: Object.fromEntries(names.map((n) => [n, m(lat1[n].p99)])),
      rps_c16: Object.fromEntries(names.map((n) => [n, round(rps[16][n], 0)])),
      rps_c64: Object.fromEntries(names.map((n) => [n, round(rps[64][n], 0)])),
      cpu_us_per_call_c64: Object.fromEntries(names.map((n) => [n, round(cpuPerCall[64][n], 0)])),
      contextd_process_cpu_us_per_assemble: round(median(contextdCpu), 0),
      samples_c1: lat1.contextd.n,
      payload: { messages: view.length, tokens: first.estimatedTokens, bytes: payloadBytes },
      errors: errors.length,
      answers_not_from_passthrough: notPassthrough,
    };
    return {
      metrics,
      goals: [
        { key: "p50_ratio_vs_echo", op: "<=", target: 2.5 },
        { key: "rps_ratio_vs_echo_c64", op: ">=", target: 0.45 },
      ],
      headline: ["p50_ratio_vs_direct", "rps_ratio_vs_direct_c64", "cpu_us_per_call_c64", "contextd_process_cpu_us_per_assemble"],
      notes: [
        "contextd_legacy: the same Assemble on a session whose agent is routed to the built-in legacy engine (one hop: what contextd itself costs without the sidecar hop); not part of the goals",
        `payload: ${view.length} messages, ${first.estimatedTokens} tokens, ${payloadBytes} bytes encoded`,
        `latency: ${latency.rounds} measured rounds × ${latency.calls} sequential calls per variant; throughput: ${load.rounds} measured ${load.windowMs} ms windows per variant and concurrency (medians)`,
        "cpu µs/call: CPU time (user+system, /proc, 10 ms ticks) of all four processes — bench client, echo server, contextd, sidecar — during a throughput window, divided by the calls it completed (median over windows); contextd_process_cpu_us_per_assemble is contextd's own share",
        ...errors,
      ],
      tables: [
        {
          title: "gateway_overhead: Assemble of a 20-message session",
          headers: ["variant", "p50 ms (c1)", "p99 ms (c1)", "rps c16", "rps c64", "CPU µs per call (c64, all processes)"],
          rows: names.map((n) => [n, m(lat1[n].p50), m(lat1[n].p99), round(rps[16][n], 0), round(rps[64][n], 0), round(cpuPerCall[64][n], 0)]),
        },
      ],
    };
  } finally {
    session.close();
    direct.close();
    echoC.close();
    await engine.child.stop();
    await cd.stop();
    await echo.child.stop();
  }
}

/** The endpoint contextd's registry has for an engine (where the sidecar really listens). */
async function registryEndpoint(address: string, engineId: string): Promise<string | undefined> {
  const reg = registryClient(address);
  try {
    return (await reg.getEngine(engineId))?.endpoint;
  } finally {
    reg.close();
  }
}

export const gatewayOverhead: Scenario = {
  name: "gateway_overhead",
  title: "Assemble through contextd to a pass-through sidecar vs a bare gRPC echo vs the sidecar directly",
  run,
};
