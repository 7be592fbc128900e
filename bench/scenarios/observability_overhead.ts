/**
 * observability_overhead: what contextd's metrics, access log and (off) tracing cost an Assemble.
 *
 * Two contextd processes on the same machine, each with the same 20-message coding session routed to
 * the built-in legacy engine (one hop: contextd's own work, where the middleware's share is largest):
 * - contextd: as shipped — request-id, metrics and access-log interceptors, the store timed, engine
 *   calls counted; tracing off (no `tracing.otlp_endpoint`);
 * - contextd_bare: started with CONTEXTD_BENCH_NO_OBSERVABILITY=1 (none of that middleware).
 * Closed loop at concurrency 16, interleaved windows; the measure is each contextd process's own
 * CPU time per Assemble (user+system from /proc), summed over every measured window.
 * Goal (docs/performance.md): the middleware costs at most 3 % of an Assemble's CPU.
 */
import { sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { closedLoop, interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import { readCpuMs } from "../harness/rss.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { median, round } from "../harness/stats.js";

const BUDGET = 32_000;
const SESSION = { sessionId: "obs-1", agentId: "bench" };

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const rounds = ctx.quick ? 3 : 12;
  const windowMs = ctx.quick ? 700 : 3_000;
  ctx.progress.update(0, rounds + 1, "starting two contextd processes");
  const full = await startContextd();
  const bare = await startContextd({ env: { CONTEXTD_BENCH_NO_OBSERVABILITY: "1" } });
  const clients = { contextd: sessionClient(full.address), contextd_bare: sessionClient(bare.address) };
  const pids = { contextd: full.pid, contextd_bare: bare.pid };
  try {
    for (const c of Object.values(clients)) await c.appendMessages({ session: SESSION, messages: codingMessages({ count: 20, seed: 1 }) });
    let step = 0;
    const windows = await interleave(
      (Object.keys(clients) as (keyof typeof clients)[]).map((name) => ({
        name,
        batch: async () => {
          const cpu0 = readCpuMs(pids[name]);
          const w = await closedLoop(() => clients[name].assemble({ session: SESSION, tokenBudget: BUDGET }), 16, { durationMs: windowMs });
          return { rps: w.rps, errors: w.errors, ok: w.ok, cpuMs: readCpuMs(pids[name]) - cpu0 };
        },
      })),
      { rounds, onBatch: () => ctx.progress.update(++step, 2 * (rounds + 1), "Assemble, concurrency 16") },
    );
    // CPU over all measured windows / calls over all of them: /proc counts 10 ms ticks, so a sum over
    // ~30 s of load per variant resolves well under 1 %.
    const perCall = (ws: { ok: number; cpuMs: number }[]) =>
      (ws.reduce((a, w) => a + w.cpuMs, 0) * 1000) /
      Math.max(
        1,
        ws.reduce((a, w) => a + w.ok, 0),
      );
    const cpu = { contextd: perCall(windows.contextd), contextd_bare: perCall(windows.contextd_bare) };
    const rps = { contextd: median(windows.contextd.map((w) => w.rps)), contextd_bare: median(windows.contextd_bare.map((w) => w.rps)) };
    const errors = [...windows.contextd, ...windows.contextd_bare].reduce((n, w) => n + w.errors, 0);
    const overhead = cpu.contextd / cpu.contextd_bare - 1;
    return {
      metrics: {
        observability_cpu_overhead: round(overhead, 4),
        contextd_cpu_us_per_assemble: round(cpu.contextd, 0),
        contextd_bare_cpu_us_per_assemble: round(cpu.contextd_bare, 0),
        rps_c16: { contextd: round(rps.contextd, 0), contextd_bare: round(rps.contextd_bare, 0) },
        errors,
      },
      goals: [{ key: "observability_cpu_overhead", op: "<=", target: 0.03 }],
      headline: ["observability_cpu_overhead", "contextd_cpu_us_per_assemble", "contextd_bare_cpu_us_per_assemble"],
      notes: [
        `${rounds} measured ${windowMs} ms windows per variant at concurrency 16, interleaved; CPU of each contextd process over all of them / the Assembles it answered (/proc, 10 ms ticks)`,
        "contextd_bare: CONTEXTD_BENCH_NO_OBSERVABILITY=1 (no interceptors, untimed store, no engine-call hooks); a measuring aid, not a configuration",
      ],
      tables: [
        {
          title: "observability_overhead: Assemble of a 20-message session (legacy engine)",
          headers: ["variant", "CPU µs per Assemble (contextd process)", "rps c16"],
          rows: [
            ["contextd", round(cpu.contextd, 0), round(rps.contextd, 0)],
            ["contextd_bare", round(cpu.contextd_bare, 0), round(rps.contextd_bare, 0)],
          ],
        },
      ],
    };
  } finally {
    for (const c of Object.values(clients)) c.close();
    await full.stop();
    await bare.stop();
  }
}

export const observabilityOverhead: Scenario = {
  name: "observability_overhead",
  title: "contextd's metrics, access-log and tracing-off middleware: CPU per Assemble against contextd without it",
  run,
};
