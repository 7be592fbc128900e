/**
 * append_throughput: durable AppendMessages on the SQLite store (WAL, synchronous=FULL: each call
 * is one transaction, fsynced before it answers) and on the PostgreSQL store (a scratch database on
 * the local server, synchronous_commit on: each call one transaction, WAL-flushed before it
 * answers), measured in the same run by two contextd processes. Four sessions are appended to
 * concurrently (one closed-loop worker each), with one message per call ("single") and 100 messages
 * per call ("batched"), in interleaved windows (all four variants rotate). The messages are the
 * same coding-agent messages as elsewhere (mixed sizes, ~400 tokens on average), drawn from a
 * pre-generated pool so that generating them costs nothing inside a window; contextd counts every
 * message's tokens (o200k_base) at append, which is part of what is measured.
 */
import { Buffer } from "node:buffer";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { sessionClient } from "../harness/clients.js";
import { startContextd, type ContextdHandle } from "../harness/contextd.js";
import { startEchoServer } from "../harness/engines.js";
import { closedLoop, interleave } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import { tryBenchDatabase } from "../harness/postgres.js";
import { readCpuMs } from "../harness/rss.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { median, round, summarize } from "../harness/stats.js";

const SESSIONS = 4;
const BATCH = 100;

function textBytes(m: Message): number {
  let n = 0;
  for (const b of m.content) {
    const v = b.block;
    if (v?.$case === "text") n += Buffer.byteLength(v.value.text);
    else if (v?.$case === "toolCall") n += Buffer.byteLength(v.value.argumentsJson);
  }
  return n;
}

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const rounds = ctx.quick ? 2 : 5;
  const windowMs = ctx.quick ? 1000 : 3000;
  const poolSize = ctx.quick ? 8_000 : 30_000;
  const pgDb = await tryBenchDatabase();
  const withPg = typeof pgDb !== "string";
  const totalSteps = 1 + (withPg ? 5 : 3) * (rounds + 1);
  let steps = 0;
  ctx.progress.update(0, totalSteps, "generating messages, starting contextd");
  const pool: Message[] = [];
  for (let seed = 100; pool.length < poolSize; seed++) pool.push(...codingMessages({ count: 500, seed }));
  const poolBytes = pool.reduce((a, m) => a + textBytes(m), 0) / pool.length;
  let next = 0;
  const take = (n: number): Message[] => {
    const out: Message[] = [];
    for (let i = 0; i < n; i++) out.push(pool[next++ % pool.length]);
    return out;
  };

  const cd = await startContextd();
  const client = sessionClient(cd.address);
  // The floor: the same client's one-message appends to a server that answers without any work.
  const floor = await startEchoServer();
  const floorClient = sessionClient(floor.address);
  let pgCd: ContextdHandle | undefined;
  let pgClient: ReturnType<typeof sessionClient> | undefined;
  try {
    if (withPg) {
      pgCd = await startContextd({ config: { store: pgDb.url } });
      pgClient = sessionClient(pgCd.address);
    }
    ctx.progress.update(++steps, totalSteps, "appending");
    type Name = "single" | "batched" | "postgres-single" | "postgres-batched" | "floor-single";
    const tokens: Record<Name, number> = { single: 0, batched: 0, "postgres-single": 0, "postgres-batched": 0, "floor-single": 0 };
    const variant = (name: Name, perCall: number, on: { cd: { pid: number }; client: typeof client } = { cd, client }) => {
      let worker = 0;
      const { cd: server, client: c } = on;
      return {
        name,
        batch: async () => {
          const before = tokens[name];
          const cpu0 = readCpuMs(server.pid);
          const r = await closedLoop(
            async () => {
              const session = { sessionId: `append-${name}-${worker++ % SESSIONS}`, agentId: "bench" };
              const res = await c.appendMessages({ session, messages: take(perCall) });
              tokens[name] += res.tokenCounts.reduce((a, b) => a + b, 0);
            },
            SESSIONS,
            { durationMs: windowMs },
          );
          // Until the search index holds the window's messages: a search waits for it (search.proto;
          // on SQLite the index is written after the append, on PostgreSQL in it). Not for the floor.
          const d0 = performance.now();
          if (name !== "floor-single") await c.searchTranscript({ session: { sessionId: `append-${name}-0`, agentId: "bench" }, query: "the" });
          const drainMs = performance.now() - d0;
          const cpuMs = readCpuMs(server.pid) - cpu0;
          return {
            ...r,
            msgsPerS: r.rps * perCall,
            indexedMsgsPerS: (r.ok * perCall * 1000) / (r.elapsedMs + drainMs),
            drainMs,
            tokensPerS: ((tokens[name] - before) * 1000) / r.elapsedMs,
            msgsPerCpuS: (r.ok * perCall * 1000) / Math.max(1, cpuMs),
            busy: cpuMs / r.elapsedMs,
          };
        },
      };
    };
    const pgOn = pgCd && pgClient ? { cd: pgCd, client: pgClient } : undefined;
    const variants = [variant("single", 1), variant("batched", BATCH), variant("floor-single", 1, { cd: floor, client: floorClient })];
    if (pgOn) variants.push(variant("postgres-single", 1, pgOn), variant("postgres-batched", BATCH, pgOn));
    const windows = await interleave(variants, {
      rounds,
      onBatch: () => ctx.progress.update(++steps, totalSteps, "appending"),
    });
    const errors = Object.values(windows)
      .flat()
      .reduce((a, w) => a + w.errors, 0);
    const stat = (name: Name) => {
      const w = windows[name];
      const lat = summarize(w.flatMap((x) => x.latencies));
      return {
        msgs_per_s: median(w.map((x) => x.msgsPerS)),
        indexed_msgs_per_s: median(w.map((x) => x.indexedMsgsPerS)),
        index_drain_ms: median(w.map((x) => x.drainMs)),
        tokens_per_s: median(w.map((x) => x.tokensPerS)),
        mb_per_s: (median(w.map((x) => x.msgsPerS)) * poolBytes) / 1e6,
        msgs_per_contextd_cpu_s: median(w.map((x) => x.msgsPerCpuS)),
        contextd_busy: median(w.map((x) => x.busy)),
        call_p50_ms: lat.p50,
        call_p99_ms: lat.p99,
      };
    };
    const single = stat("single");
    const floorSingle = stat("floor-single");
    const batched = stat("batched");
    const pgSingle = pgOn ? stat("postgres-single") : undefined;
    const pgBatched = pgOn ? stat("postgres-batched") : undefined;
    type Stat = ReturnType<typeof stat>;
    const detail = (x: Stat) => ({
      tokens_per_s: round(x.tokens_per_s, 0),
      mb_per_s: round(x.mb_per_s, 2),
      call_p50_ms: round(x.call_p50_ms, 2),
      call_p99_ms: round(x.call_p99_ms, 2),
      msgs_per_contextd_cpu_s: round(x.msgs_per_contextd_cpu_s, 0),
      contextd_cpu_busy: round(x.contextd_busy, 2),
    });
    const row = (store: string, mode: string, x: Stat) => [
      store,
      mode,
      round(x.msgs_per_s, 0),
      round(x.tokens_per_s, 0),
      round(x.mb_per_s, 2),
      round(x.call_p50_ms, 2),
      round(x.call_p99_ms, 2),
      round(x.msgs_per_contextd_cpu_s, 0),
      round(x.contextd_busy, 2),
    ];
    return {
      metrics: {
        single_msgs_per_s: round(single.msgs_per_s, 0),
        single_floor_calls_per_s: round(floorSingle.msgs_per_s, 0),
        single_ratio_vs_floor: round(single.msgs_per_s / floorSingle.msgs_per_s, 3),
        batched_msgs_per_s: round(batched.msgs_per_s, 0),
        batched_msgs_per_contextd_cpu_s: round(batched.msgs_per_contextd_cpu_s, 0),
        batched_indexed_msgs_per_s: round(batched.indexed_msgs_per_s, 0),
        batched_index_drain_ms: round(batched.index_drain_ms, 1),
        single: detail(single),
        batched: detail(batched),
        postgres_batched_msgs_per_s: pgBatched ? round(pgBatched.msgs_per_s, 0) : null,
        postgres_batched_indexed_msgs_per_s: pgBatched ? round(pgBatched.indexed_msgs_per_s, 0) : null,
        postgres_single_msgs_per_s: pgSingle ? round(pgSingle.msgs_per_s, 0) : null,
        postgres: pgSingle && pgBatched ? { single: detail(pgSingle), batched: detail(pgBatched) } : { unavailable: pgDb as string },
        message_bytes_avg: round(poolBytes, 0),
        tokens_counted_by_contextd: tokens.single + tokens.batched,
        sessions: SESSIONS,
        batch_size: BATCH,
        errors,
      },
      goals: [
        { key: "batched_msgs_per_s", op: ">=", target: 6000 },
        { key: "single_msgs_per_s", op: ">=", target: 3000 },
      ],
      headline: [
        "single_msgs_per_s",
        "single_floor_calls_per_s",
        "single_ratio_vs_floor",
        "batched_msgs_per_contextd_cpu_s",
        "batched_indexed_msgs_per_s",
        "batched_index_drain_ms",
        "postgres_batched_msgs_per_s",
        "postgres_single_msgs_per_s",
      ],
      notes: [
        `${SESSIONS} sessions appended to concurrently; ${rounds} measured windows of ${windowMs} ms per variant, interleaved; medians`,
        `messages average ${Math.round(poolBytes)} bytes of text; tokens are counted by contextd at append (${((tokens.single + tokens.batched) / 1e6).toFixed(1)}M tokens in this run)`,
        "floor: the same one-message AppendMessages calls, from the same client and 4 workers, to a bare grpc-js server (bench/engines/echo-server.ts) that answers a fixed response without decoding the request, storing or counting anything — the most any server could answer this client at this concurrency on this machine; single_ratio_vs_floor = contextd's single msgs/s ÷ the floor's calls/s (its CPU columns are that server's)",
        "indexed: the window's messages over the window and then the time a SearchTranscript took to answer — it waits until the search index holds everything appended before it (search.proto): on SQLite the index is written after the append, by a thread beside the event loop, so batched_msgs_per_s counts appends answered and batched_indexed_msgs_per_s appends also indexed; batched_index_drain_ms is that search's median wait",
        "msgs per contextd CPU-second: messages appended per second of CPU time contextd used in the window (/proc) — what one fully available core would sustain, independent of other load on the machine; busy: contextd's CPU time / wall time",
        withPg
          ? "PostgreSQL: a second contextd on a scratch database of the local server (created and dropped by the bench), pool defaults (pool_max 10), server defaults (synchronous_commit on); its CPU-s column counts contextd only, not the PostgreSQL server processes"
          : `PostgreSQL: not measured: ${pgDb as string}`,
      ],
      tables: [
        {
          title: "append_throughput: durable appends, SQLite and PostgreSQL, 4 concurrent sessions",
          headers: ["store", "mode", "msgs/s", "tokens/s", "MB/s", "call p50 ms", "call p99 ms", "msgs per contextd CPU-s", "contextd busy"],
          rows: [
            row("sqlite", "single", single),
            row("sqlite", `batch of ${BATCH}`, batched),
            // Its token counts are the fixed answer's, not counted: no tokens/s.
            row("floor (no work)", "single", floorSingle).map((v, i) => (i === 3 ? "—" : v)),
            ...(pgSingle && pgBatched
              ? [row("postgres", "single", pgSingle), row("postgres", `batch of ${BATCH}`, pgBatched)]
              : [["postgres", "—", "not measured", "", "", "", "", "", ""]]),
          ],
        },
      ],
    };
  } finally {
    client.close();
    floorClient.close();
    pgClient?.close();
    await cd.stop();
    await floor.child.stop();
    await pgCd?.stop();
    if (typeof pgDb !== "string") await pgDb.drop();
  }
}

export const appendThroughput: Scenario = {
  name: "append_throughput",
  title: "Durable AppendMessages on SQLite and PostgreSQL: one message per call vs batches of 100, 4 concurrent sessions",
  run,
};
