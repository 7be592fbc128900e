/**
 * compaction_deadline: how far past its deadline a Compact on a hung engine answers. Three sidecars
 * (bench/engines/hang-compact.ts: Compact never answers and ignores cancellation) are registered
 * with one contextd whose `engines.overrides` give them compact deadlines of 250 ms, 1 s and 2 s;
 * `slots.agents` routes one agent to each. SessionService.Compact (force false, budget 32k, a small
 * session that already fits) then hits the deadline, the engine is quarantined, and the call is
 * answered by `legacy` (a no-op compaction here, so the fallback adds almost nothing). overshoot =
 * the Compact latency seen by the runtime − the deadline. After each call the bench clears the
 * quarantine (RegistryService.ClearQuarantine) so the next call reaches the hung engine again. In
 * each round the three deadlines are called at once (one call each).
 */
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { registryClient, sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { startBenchEngine, type EngineHandle } from "../harness/engines.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, percentile, round, summarize } from "../harness/stats.js";

const DEADLINES = [
  { ms: 250, text: "250ms", engine: "hang-250ms", agent: "deadline-250ms" },
  { ms: 1000, text: "1s", engine: "hang-1s", agent: "deadline-1s" },
  { ms: 2000, text: "2s", engine: "hang-2s", agent: "deadline-2s" },
];

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const rounds = ctx.quick ? 4 : 30;
  ctx.progress.update(0, rounds + 1, "starting contextd and three hung engines");
  const cd = await startContextd({
    config: {
      slots: { agents: Object.fromEntries(DEADLINES.map((d) => [d.agent, d.engine])) },
      engines: { overrides: Object.fromEntries(DEADLINES.map((d) => [d.engine, { timeouts: { compact: d.text } }])) },
    },
  });
  const engines: EngineHandle[] = [];
  const client = sessionClient(cd.address);
  const registry = registryClient(cd.address);
  try {
    for (const d of DEADLINES) engines.push(await startBenchEngine("hang-compact", cd.address, d.engine));
    for (const d of DEADLINES) {
      await client.appendMessages({ session: { sessionId: `deadline-${d.text}`, agentId: d.agent }, messages: codingMessages({ count: 6, seed: d.ms }) });
    }
    const overshoot: Record<string, number[]> = Object.fromEntries(DEADLINES.map((d) => [d.text, []]));
    const unexpected: string[] = [];
    const once = async (d: (typeof DEADLINES)[number]) => {
      const s = nowMs();
      const res = await client.compact(
        { session: { sessionId: `deadline-${d.text}`, agentId: d.agent }, tokenBudget: 32_000, force: false },
        { timeoutMs: 60_000 },
      );
      const latency = nowMs() - s;
      if (res.mode !== Mode.MODE_FALLBACK || res.engineId !== "legacy") unexpected.push(`${d.text}: answered by ${res.engineId} in mode ${res.mode}`);
      await registry.clearQuarantine(d.engine);
      return latency - d.ms;
    };
    // One warm-up round, not counted.
    await Promise.all(DEADLINES.map(once));
    ctx.progress.update(1, rounds + 1, "Compact on hung engines");
    for (let r = 0; r < rounds; r++) {
      const results = await Promise.all(DEADLINES.map(once));
      DEADLINES.forEach((d, i) => overshoot[d.text].push(results[i]));
      ctx.progress.update(r + 2, rounds + 1, "Compact on hung engines");
    }
    const all = Object.values(overshoot).flat();
    const per = Object.fromEntries(DEADLINES.map((d) => [d.text, summarize(overshoot[d.text])]));
    return {
      metrics: {
        overshoot_ms_p99: round(percentile(all, 99), 1),
        overshoot_ms_p50: round(percentile(all, 50), 1),
        overshoot_ms_p99_by_deadline: Object.fromEntries(DEADLINES.map((d) => [d.text, round(per[d.text].p99, 1)])),
        overshoot_ms_p50_by_deadline: Object.fromEntries(DEADLINES.map((d) => [d.text, round(per[d.text].p50, 1)])),
        overshoot_ms_min: round(Math.min(...all), 1),
        samples_per_deadline: rounds,
        unexpected_answers: unexpected.length,
      },
      goals: [{ key: "overshoot_ms_p99", op: "<=", target: 25 }],
      headline: ["overshoot_ms_p99_by_deadline"],
      notes: [
        `${rounds} measured rounds (after one warm-up round); in each, one Compact per deadline, the three at once`,
        "overshoot = Compact latency at the runtime − the engine's compact deadline; the answer comes from legacy (mode FALLBACK) after the deadline",
        ...unexpected.slice(0, 3),
      ],
      tables: [
        {
          title: "compaction_deadline: Compact on an engine that never answers",
          headers: ["deadline", "samples", "overshoot p50 ms", "overshoot p99 ms", "overshoot max ms"],
          rows: DEADLINES.map((d) => [d.text, per[d.text].n, round(per[d.text].p50, 1), round(per[d.text].p99, 1), round(per[d.text].max, 1)]),
        },
      ],
    };
  } finally {
    client.close();
    registry.close();
    for (const e of engines) e.child.kill("SIGKILL");
    await cd.stop();
  }
}

export const compactionDeadline: Scenario = {
  name: "compaction_deadline",
  title: "SessionService.Compact on engines that hang on Compact, under compact deadlines of 250 ms, 1 s and 2 s",
  run,
};
