/**
 * assemble_scaling: does Assemble get slower as a session's history grows? Sessions of 1k, 10k and
 * 100k messages (--quick: 1k, 5k, 20k) are built by appending batches of 1000 small coding-agent
 * messages, each batch followed by a forced SessionService.Compact at the budget — as a long session
 * is compacted over its life — so the active view stays small while the history grows. Then
 * Assemble (legacy engine, budget 32k, the view fits so no compaction runs) is measured on each
 * session in interleaved batches of sequential calls.
 *
 * PostgreSQL beside SQLite: a second contextd on a scratch database of the local server gets the
 * same 10k-message session (--quick: 5k), built the same way from the same messages, and its
 * Assemble is measured in the same interleaved rounds: `postgres_vs_sqlite_assemble_p50_ratio` is
 * its p50 over the SQLite session's of the same size.
 */
import { sessionClient } from "../harness/clients.js";
import { startContextd, type ContextdHandle } from "../harness/contextd.js";
import { interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import { tryBenchDatabase } from "../harness/postgres.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, ratio, round, summarize } from "../harness/stats.js";

const BUDGET = 32_000;
const BATCH = 1000;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const sizes = ctx.quick ? [1_000, 5_000, 20_000] : [1_000, 10_000, 100_000];
  const rounds = ctx.quick ? 4 : 10;
  const calls = ctx.quick ? 40 : 100;
  const pgSize = sizes[1];
  const pgDb = await tryBenchDatabase();
  const withPg = typeof pgDb !== "string";
  const setupSteps = sizes.reduce((a, n) => a + n / BATCH, 0) + (withPg ? pgSize / BATCH : 0);
  const totalSteps = setupSteps + (rounds + 1) * (sizes.length + (withPg ? 1 : 0));
  let steps = 0;

  const cd = await startContextd();
  const client = sessionClient(cd.address);
  let pgCd: ContextdHandle | undefined;
  let pgClient: ReturnType<typeof sessionClient> | undefined;
  try {
    type Setup = { seconds: number; entries: number; view_messages: number; view_tokens: number };
    const build = async (c: typeof client, size: number, store: string): Promise<Setup> => {
      const session = { sessionId: `scaling-${size}`, agentId: "bench" };
      const t0 = nowMs();
      for (let b = 0; b < size / BATCH; b++) {
        const messages = codingMessages({ count: BATCH, seed: size + b, size: "small" });
        await c.appendMessages({ session, messages });
        await c.compact({ session, tokenBudget: BUDGET, force: true });
        ctx.progress.update(++steps, totalSteps, `building the ${size}-message session (${store})`);
      }
      const info = (await c.getSession({ session })).info!;
      const view = await c.assemble({ session, tokenBudget: BUDGET });
      if (view.compaction) throw new Error(`session ${size}: Assemble compacted; the view was expected to fit`);
      return { seconds: (nowMs() - t0) / 1000, entries: info.entryCount, view_messages: view.messages.length, view_tokens: view.estimatedTokens };
    };
    const setup: Record<number, Setup> = {};
    for (const size of sizes) setup[size] = await build(client, size, "sqlite");
    let pgSetup: Setup | undefined;
    if (withPg) {
      pgCd = await startContextd({ config: { store: pgDb.url } });
      pgClient = sessionClient(pgCd.address);
      pgSetup = await build(pgClient, pgSize, "postgres");
    }

    const measure = (name: string, c: typeof client, size: number) => ({
      name,
      batch: async () => {
        const out: number[] = [];
        const session = { sessionId: `scaling-${size}`, agentId: "bench" };
        for (let i = 0; i < calls; i++) {
          const s = nowMs();
          await c.assemble({ session, tokenBudget: BUDGET });
          out.push(nowMs() - s);
        }
        return out;
      },
    });
    const variants = sizes.map((size) => measure(String(size), client, size));
    if (pgClient) variants.push(measure("postgres", pgClient, pgSize));
    const samples = await interleave<number[]>(variants, { rounds, onBatch: () => ctx.progress.update(++steps, totalSteps, "measuring Assemble") });
    const stats = Object.fromEntries(sizes.map((s) => [s, summarize(samples[String(s)].flat())]));
    const pgStats = pgClient ? summarize(samples.postgres.flat()) : undefined;
    const [small, , large] = sizes;
    const label = (n: number) => `${n / 1000}k`;
    return {
      metrics: {
        p50_ratio_100k_vs_1k: round(ratio(stats[large].p50, stats[small].p50), 3),
        postgres_assemble_p50_ms: pgStats ? round(pgStats.p50, 3) : null,
        postgres_vs_sqlite_assemble_p50_ratio: pgStats ? round(ratio(pgStats.p50, stats[pgSize].p50), 3) : null,
        postgres:
          pgStats && pgSetup
            ? {
                session_messages: pgSize,
                p50_ms: round(pgStats.p50, 3),
                p99_ms: round(pgStats.p99, 3),
                sqlite_p50_ms: round(stats[pgSize].p50, 3),
                session: pgSetup,
              }
            : { unavailable: pgDb as string },
        sizes,
        largest_session_messages: large,
        p50_ms: Object.fromEntries(sizes.map((s) => [label(s), round(stats[s].p50, 3)])),
        p99_ms: Object.fromEntries(sizes.map((s) => [label(s), round(stats[s].p99, 3)])),
        sessions: Object.fromEntries(sizes.map((s) => [label(s), setup[s]])),
        samples_per_size: stats[small].n,
        ...(ctx.quick ? { quick: `sessions of 1k/5k/20k messages: p50_ratio_100k_vs_1k is the 20k session against the 1k one` } : {}),
      },
      goals: [
        { key: "p50_ratio_100k_vs_1k", op: "<=", target: 1.25 },
        { key: "postgres_vs_sqlite_assemble_p50_ratio", op: "<=", target: 2.0 },
      ],
      headline: ["p50_ms", "postgres_assemble_p50_ms"],
      notes: [
        ...(ctx.quick ? ["--quick: sessions of 1k, 5k and 20k messages; p50_ratio_100k_vs_1k is then the 20k session against the 1k one"] : []),
        `each session: batches of ${BATCH} small coding messages, each followed by a forced Compact at budget ${BUDGET}; Assemble at ${BUDGET} on the legacy engine; ${rounds} measured rounds × ${calls} sequential calls per session, interleaved`,
        withPg
          ? `PostgreSQL: the ${pgSize / 1000}k session built the same way on a second contextd whose store is a scratch database of the local server (created and dropped by the bench), measured in the same rounds; postgres_vs_sqlite_assemble_p50_ratio = its p50 / the SQLite ${pgSize / 1000}k session's p50`
          : `PostgreSQL: not measured: ${pgDb as string}`,
      ],
      tables: [
        {
          title: "assemble_scaling: Assemble latency by history length (legacy, budget 32k)",
          headers: ["store", "messages appended", "entries", "view messages", "view tokens", "p50 ms", "p99 ms", "build s"],
          rows: [
            ...sizes.map((s) => [
              "sqlite",
              s,
              setup[s].entries,
              setup[s].view_messages,
              setup[s].view_tokens,
              round(stats[s].p50, 3),
              round(stats[s].p99, 3),
              round(setup[s].seconds, 1),
            ]),
            ...(pgStats && pgSetup
              ? [
                  [
                    "postgres",
                    pgSize,
                    pgSetup.entries,
                    pgSetup.view_messages,
                    pgSetup.view_tokens,
                    round(pgStats.p50, 3),
                    round(pgStats.p99, 3),
                    round(pgSetup.seconds, 1),
                  ],
                ]
              : []),
          ],
        },
      ],
    };
  } finally {
    client.close();
    pgClient?.close();
    await cd.stop();
    await pgCd?.stop();
    if (typeof pgDb !== "string") await pgDb.drop();
  }
}

export const assembleScaling: Scenario = {
  name: "assemble_scaling",
  title: "Assemble p50 on compacted sessions of 1k, 10k and 100k messages (legacy, budget 32k); PostgreSQL beside SQLite at 10k",
  run,
};
