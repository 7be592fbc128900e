/**
 * assemble_scaling: does Assemble get slower as a session's history grows? Sessions of 1k, 10k and
 * 100k messages (--quick: 1k, 5k, 20k) are built by appending batches of 1000 small coding-agent
 * messages, each batch followed by a forced SessionService.Compact at the budget — as a long session
 * is compacted over its life — so the active view stays small while the history grows. Then
 * Assemble (legacy engine, budget 32k, the view fits so no compaction runs) is measured on each
 * session in interleaved batches of sequential calls.
 */
import { sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, ratio, round, summarize } from "../harness/stats.js";

const BUDGET = 32_000;
const BATCH = 1000;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const sizes = ctx.quick ? [1_000, 5_000, 20_000] : [1_000, 10_000, 100_000];
  const rounds = ctx.quick ? 4 : 10;
  const calls = ctx.quick ? 40 : 100;
  const setupSteps = sizes.reduce((a, n) => a + n / BATCH, 0);
  const totalSteps = setupSteps + (rounds + 1) * sizes.length;
  let steps = 0;

  const cd = await startContextd();
  const client = sessionClient(cd.address);
  try {
    const setup: Record<number, { seconds: number; entries: number; view_messages: number; view_tokens: number }> = {};
    for (const size of sizes) {
      const session = { sessionId: `scaling-${size}`, agentId: "bench" };
      const t0 = nowMs();
      for (let b = 0; b < size / BATCH; b++) {
        const messages = codingMessages({ count: BATCH, seed: size + b, size: "small" });
        await client.appendMessages({ session, messages });
        await client.compact({ session, tokenBudget: BUDGET, force: true });
        ctx.progress.update(++steps, totalSteps, `building the ${size}-message session`);
      }
      const info = (await client.getSession({ session })).info!;
      const view = await client.assemble({ session, tokenBudget: BUDGET });
      if (view.compaction) throw new Error(`session ${size}: Assemble compacted; the view was expected to fit`);
      setup[size] = { seconds: (nowMs() - t0) / 1000, entries: info.entryCount, view_messages: view.messages.length, view_tokens: view.estimatedTokens };
    }

    const samples = await interleave<number[]>(
      sizes.map((size) => ({
        name: String(size),
        batch: async () => {
          const out: number[] = [];
          const session = { sessionId: `scaling-${size}`, agentId: "bench" };
          for (let i = 0; i < calls; i++) {
            const s = nowMs();
            await client.assemble({ session, tokenBudget: BUDGET });
            out.push(nowMs() - s);
          }
          return out;
        },
      })),
      { rounds, onBatch: () => ctx.progress.update(++steps, totalSteps, "measuring Assemble") },
    );
    const stats = Object.fromEntries(sizes.map((s) => [s, summarize(samples[String(s)].flat())]));
    const [small, , large] = sizes;
    const label = (n: number) => `${n / 1000}k`;
    return {
      metrics: {
        p50_ratio_100k_vs_1k: round(ratio(stats[large].p50, stats[small].p50), 3),
        sizes,
        largest_session_messages: large,
        p50_ms: Object.fromEntries(sizes.map((s) => [label(s), round(stats[s].p50, 3)])),
        p99_ms: Object.fromEntries(sizes.map((s) => [label(s), round(stats[s].p99, 3)])),
        sessions: Object.fromEntries(sizes.map((s) => [label(s), setup[s]])),
        samples_per_size: stats[small].n,
        ...(ctx.quick ? { quick: `sessions of 1k/5k/20k messages: p50_ratio_100k_vs_1k is the 20k session against the 1k one` } : {}),
      },
      goals: [{ key: "p50_ratio_100k_vs_1k", op: "<=", target: 2.0 }],
      headline: ["p50_ms"],
      notes: [
        ...(ctx.quick ? ["--quick: sessions of 1k, 5k and 20k messages; p50_ratio_100k_vs_1k is then the 20k session against the 1k one"] : []),
        `each session: batches of ${BATCH} small coding messages, each followed by a forced Compact at budget ${BUDGET}; Assemble at ${BUDGET} on the legacy engine; ${rounds} measured rounds × ${calls} sequential calls per session, interleaved`,
      ],
      tables: [
        {
          title: "assemble_scaling: Assemble latency by history length (legacy, budget 32k)",
          headers: ["messages appended", "entries", "view messages", "view tokens", "p50 ms", "p99 ms", "build s"],
          rows: sizes.map((s) => [s, setup[s].entries, setup[s].view_messages, setup[s].view_tokens, round(stats[s].p50, 3), round(stats[s].p99, 3), round(setup[s].seconds, 1)]),
        },
      ],
    };
  } finally {
    client.close();
    await cd.stop();
  }
}

export const assembleScaling: Scenario = {
  name: "assemble_scaling",
  title: "Assemble p50 on compacted sessions of 1k, 10k and 100k messages (legacy, budget 32k)",
  run,
};
