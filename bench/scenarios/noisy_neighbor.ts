/**
 * noisy_neighbor: does one tenant at its limits slow another? Two runtime tokens on one contextd
 * (auth required, the default `limits.tenant`): `quiet` assembles its one session (legacy, budget
 * 32k, a view that fits) in batches of sequential calls, in two interleaved variants — alone, and
 * while `noisy` runs more closed-loop workers than its limits admit, each appending batches of
 * coding messages and assembling its own sessions back to back, retrying at once whatever it is
 * refused. `neighbor_p99_ratio_under_noisy_tenant` is quiet's p99 under the noise over its p99 alone.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, ratio, round, summarize } from "../harness/stats.js";

const BUDGET = 32_000;
/** More than the default limits.tenant.max_calls_in_flight (64): the noisy tenant is held at its limit. */
const NOISY_WORKERS = 96;
const NOISY_AGENTS = 8;
const BATCH = 20;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const rounds = ctx.quick ? 2 : 6;
  const calls = ctx.quick ? 30 : 150;
  const totalSteps = 2 + (rounds + 1) * 2;
  let steps = 0;
  ctx.progress.update(0, totalSteps, "generating messages, starting contextd");
  const pool: Message[] = [];
  for (let seed = 900; pool.length < (ctx.quick ? 2_000 : 10_000); seed++) pool.push(...codingMessages({ count: 500, seed }));
  let next = 0;
  const take = (n: number): Message[] => Array.from({ length: n }, () => pool[next++ % pool.length]);

  const cd = await startContextd({
    config: {
      auth: {
        required: true,
        runtimes: [
          { name: "noisy", token_env: "NOISY_TOKEN", agents: ["noisy-*"] },
          { name: "quiet", token_env: "QUIET_TOKEN", agents: ["quiet"] },
        ],
      },
    },
    env: { NOISY_TOKEN: "bench-noisy", QUIET_TOKEN: "bench-quiet" },
  });
  const quiet = new ContextdClient({ address: cd.address, token: "bench-quiet", timeoutMs: 60_000 });
  const noisy = new ContextdClient({ address: cd.address, token: "bench-noisy", timeoutMs: 60_000 });
  try {
    const target = { sessionId: "neighbor-target", agentId: "quiet" };
    await quiet.appendMessages({ session: target, messages: codingMessages({ count: 200, seed: 7, size: "small" }) });
    const first = await quiet.assemble({ session: target, tokenBudget: BUDGET });
    const settled = await quiet.assemble({ session: target, tokenBudget: BUDGET });
    if (settled.compaction) throw new Error("the quiet session's view was expected to fit the budget after its first Assemble");
    ctx.progress.update(++steps, totalSteps, "measuring");

    const noise = { ok: 0, refused: 0, errors: 0, ms: 0 };
    const refusals = new Map<string, number>();
    const startNoise = () => {
      let stop = false;
      const t0 = nowMs();
      let warmed!: () => void;
      const warm = new Promise<void>((resolve) => (warmed = resolve));
      const worker = async (w: number) => {
        const session = { sessionId: `noisy-${w}`, agentId: `noisy-${w % NOISY_AGENTS}` };
        for (let i = 0; !stop; i++) {
          try {
            if (i % 2 === 0) await noisy.appendMessages({ session, messages: take(BATCH) });
            else await noisy.assemble({ session, tokenBudget: BUDGET });
            noise.ok++;
            warmed();
          } catch (err) {
            const e = err as ServiceError;
            if (e.code === status.RESOURCE_EXHAUSTED) {
              noise.refused++;
              const limit = /\((limits\.[a-z_.]+|server\.[a-z_]+)\)/.exec(e.details)?.[1] ?? "other";
              refusals.set(limit, (refusals.get(limit) ?? 0) + 1);
            } else noise.errors++;
          }
        }
      };
      const running = Promise.all(Array.from({ length: NOISY_WORKERS }, (_, w) => worker(w)));
      return {
        warm,
        stop: async () => {
          stop = true;
          await running;
          noise.ms += nowMs() - t0;
        },
      };
    };
    const assembleBatch = async (): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < calls; i++) {
        const s = nowMs();
        await quiet.assemble({ session: target, tokenBudget: BUDGET });
        out.push(nowMs() - s);
      }
      return out;
    };
    const samples = await interleave<number[]>(
      [
        { name: "alone", batch: assembleBatch },
        {
          name: "noisy",
          batch: async () => {
            const n = startNoise();
            try {
              await n.warm;
              return await assembleBatch();
            } finally {
              await n.stop();
            }
          },
        },
      ],
      { rounds, onBatch: () => ctx.progress.update(++steps, totalSteps, "measuring") },
    );
    const alone = summarize(samples.alone.flat());
    const loaded = summarize(samples.noisy.flat());
    return {
      metrics: {
        neighbor_p99_ratio_under_noisy_tenant: round(ratio(loaded.p99, alone.p99), 3),
        neighbor_p50_ratio_under_noisy_tenant: round(ratio(loaded.p50, alone.p50), 3),
        alone_p50_ms: round(alone.p50, 3),
        alone_p99_ms: round(alone.p99, 3),
        noisy_p50_ms: round(loaded.p50, 3),
        noisy_p99_ms: round(loaded.p99, 3),
        noisy_calls_per_s: round((noise.ok * 1000) / Math.max(1, noise.ms), 0),
        noisy_refused_per_s: round((noise.refused * 1000) / Math.max(1, noise.ms), 0),
        noisy_refused_by_limit: Object.fromEntries(refusals),
        noisy_errors: noise.errors,
        target_view: { messages: settled.messages.length, tokens: settled.estimatedTokens, compacted_at_setup: Boolean(first.compaction) },
        samples_per_variant: alone.n,
      },
      goals: [{ key: "neighbor_p99_ratio_under_noisy_tenant", op: "<=", target: 2.0 }],
      headline: ["alone_p99_ms", "noisy_p99_ms", "noisy_calls_per_s", "noisy_refused_per_s"],
      notes: [
        `quiet: Assemble at ${BUDGET} (legacy) on one session, ${rounds} rounds × ${calls} sequential calls per variant, interleaved`,
        `noisy: ${NOISY_WORKERS} closed-loop workers over ${NOISY_AGENTS} agents, alternating AppendMessages of ${BATCH} coding messages and Assemble at ${BUDGET} of their own sessions, retrying at once when refused; default limits.tenant`,
      ],
      tables: [
        {
          title: "noisy_neighbor: the quiet tenant's Assemble latency alone and beside a noisy tenant at its limits",
          headers: ["variant", "p50 ms", "p99 ms", "max ms", "samples"],
          rows: [
            ["alone", round(alone.p50, 3), round(alone.p99, 3), round(alone.max, 3), alone.n],
            ["beside the noisy tenant", round(loaded.p50, 3), round(loaded.p99, 3), round(loaded.max, 3), loaded.n],
          ],
        },
      ],
    };
  } finally {
    quiet.close();
    noisy.close();
    await cd.stop();
  }
}

export const noisyNeighbor: Scenario = {
  name: "noisy_neighbor",
  title: "One tenant's Assemble p99 beside another tenant held at its limits, against alone",
  run,
};
