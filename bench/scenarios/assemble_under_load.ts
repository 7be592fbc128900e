/**
 * assemble_under_load: does a burst of heavy appends stall Assemble? One session is assembled
 * (legacy, budget 32k, a view that fits, so no compaction runs) in batches of sequential calls, in
 * two interleaved variants: alone, and while four other sessions are appended to in batches of 100
 * coding messages by four closed-loop writers (each append is durable and counted with o200k_base —
 * the CPU-heavy part). `assemble_p99_ratio_under_append_load` is the loaded p99 over the alone p99.
 *
 * Both variants hit the same contextd and the same session; the writers start before and stop
 * after each loaded batch, so every loaded Assemble runs with appends in flight.
 */
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, ratio, round, summarize } from "../harness/stats.js";

const BUDGET = 32_000;
const WRITERS = 4;
const BATCH = 100;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const rounds = ctx.quick ? 2 : 6;
  const calls = ctx.quick ? 30 : 150;
  const poolSize = ctx.quick ? 4_000 : 20_000;
  const totalSteps = 2 + (rounds + 1) * 2;
  let steps = 0;
  ctx.progress.update(0, totalSteps, "generating messages, starting contextd");
  const pool: Message[] = [];
  for (let seed = 500; pool.length < poolSize; seed++) pool.push(...codingMessages({ count: 500, seed }));
  let next = 0;
  const take = (n: number): Message[] => Array.from({ length: n }, () => pool[next++ % pool.length]);

  const cd = await startContextd();
  const client = sessionClient(cd.address);
  const writerClient = sessionClient(cd.address);
  try {
    const target = { sessionId: "under-load-target", agentId: "bench" };
    await client.appendMessages({ session: target, messages: codingMessages({ count: 200, seed: 7, size: "small" }) });
    const first = await client.assemble({ session: target, tokenBudget: BUDGET });
    const settled = await client.assemble({ session: target, tokenBudget: BUDGET });
    if (settled.compaction) throw new Error("the target session's view was expected to fit the budget after its first Assemble");
    ctx.progress.update(++steps, totalSteps, "measuring");

    let appended = 0;
    let appendMs = 0;
    let appendErrors = 0;
    /**
     * Starts the writers; resolves `warm` once each has had one append answered (from then on every
     * writer always has one in flight); `stop` stops them and waits for the calls in flight.
     */
    const startWriters = () => {
      let stop = false;
      const t0 = nowMs();
      const firstAnswers: Promise<void>[] = [];
      const writer = async (w: number, answered: () => void) => {
        const session = { sessionId: `under-load-writer-${w}`, agentId: "bench" };
        while (!stop) {
          try {
            await writerClient.appendMessages({ session, messages: take(BATCH) });
            appended += BATCH;
          } catch {
            appendErrors++;
          }
          answered();
        }
      };
      const running = Promise.all(
        Array.from({ length: WRITERS }, (_, w) => {
          let answered!: () => void;
          firstAnswers.push(new Promise<void>((r) => (answered = r)));
          return writer(w, answered);
        }),
      );
      return {
        warm: Promise.all(firstAnswers),
        stop: async () => {
          stop = true;
          await running;
          appendMs += nowMs() - t0;
        },
      };
    };
    const assembleBatch = async (): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < calls; i++) {
        const s = nowMs();
        await client.assemble({ session: target, tokenBudget: BUDGET });
        out.push(nowMs() - s);
      }
      return out;
    };
    const samples = await interleave<number[]>(
      [
        { name: "alone", batch: assembleBatch },
        {
          name: "under_append_load",
          batch: async () => {
            const writers = startWriters();
            try {
              await writers.warm;
              return await assembleBatch();
            } finally {
              await writers.stop();
            }
          },
        },
      ],
      { rounds, onBatch: () => ctx.progress.update(++steps, totalSteps, "measuring") },
    );
    const alone = summarize(samples.alone.flat());
    const loaded = summarize(samples.under_append_load.flat());
    return {
      metrics: {
        assemble_p99_ratio_under_append_load: round(ratio(loaded.p99, alone.p99), 3),
        assemble_p50_ratio_under_append_load: round(ratio(loaded.p50, alone.p50), 3),
        alone_p50_ms: round(alone.p50, 3),
        alone_p99_ms: round(alone.p99, 3),
        under_load_p50_ms: round(loaded.p50, 3),
        under_load_p99_ms: round(loaded.p99, 3),
        append_msgs_per_s_during_load: round((appended * 1000) / Math.max(1, appendMs), 0),
        append_errors: appendErrors,
        target_view: { messages: settled.messages.length, tokens: settled.estimatedTokens, compacted_at_setup: Boolean(first.compaction) },
        samples_per_variant: alone.n,
      },
      goals: [{ key: "assemble_p99_ratio_under_append_load", op: "<=", target: 2.0 }],
      headline: ["alone_p99_ms", "under_load_p99_ms", "append_msgs_per_s_during_load"],
      notes: [
        `Assemble at ${BUDGET} (legacy) on one session, ${rounds} rounds × ${calls} sequential calls per variant, interleaved; loaded: ${WRITERS} closed-loop writers appending batches of ${BATCH} coding messages to ${WRITERS} other sessions of the same contextd (SQLite, o200k_base counting at append)`,
      ],
      tables: [
        {
          title: "assemble_under_load: Assemble latency alone and under append load",
          headers: ["variant", "p50 ms", "p99 ms", "max ms", "samples"],
          rows: [
            ["alone", round(alone.p50, 3), round(alone.p99, 3), round(alone.max, 3), alone.n],
            ["under append load", round(loaded.p50, 3), round(loaded.p99, 3), round(loaded.max, 3), loaded.n],
          ],
        },
      ],
    };
  } finally {
    client.close();
    writerClient.close();
    await cd.stop();
  }
}

export const assembleUnderLoad: Scenario = {
  name: "assemble_under_load",
  title: "Assemble p99 on one session while four others append in batches of 100, against Assemble alone",
  run,
};
