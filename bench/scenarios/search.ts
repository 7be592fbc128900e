/**
 * search: SessionService.SearchTranscript over a 100k-entry session (10k with --quick), on SQLite
 * (FTS5) and, when the local server is reachable, on PostgreSQL (tsvector under GIN). The session is
 * built from the small coding-agent messages (user requests with paths, error lines and PAY-nnnn
 * tickets, tool calls and their results), appended in batches of 1 000 — so every entry went through
 * the append path with the index on — with a few planted strings: `BILL-4821` once near the start,
 * `invoice_rounding.ts` in 10 messages spread over the history. Then, interleaved, the first page
 * (20 hits) of a mix of queries, newest first: the planted ticket (1 hit), the planted path (10
 * hits), a ticket of the generated ones, and a word most entries hold; and the mix again by
 * relevance (which ranks the 1 000 newest matches). Latency is the gRPC call as the client sees it.
 */
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { SearchOrder } from "../../src/contract/gen/contextd/v1/search.js";
import { textMessage } from "../../src/contract/messages.js";
import { sessionClient, type ContextdClient } from "../harness/clients.js";
import { startContextd, type ContextdHandle } from "../harness/contextd.js";
import { codingMessages } from "../harness/messages.js";
import { tryBenchDatabase } from "../harness/postgres.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { round, summarize } from "../harness/stats.js";

const BATCH = 1000;
const PAGE = 20;

interface Query {
  name: string;
  query: string;
}

async function build(client: ContextdClient, sessionId: string, entries: number, onBatch: () => void): Promise<void> {
  const session = { sessionId, agentId: "bench-search" };
  for (let done = 0, seed = 7000; done < entries; seed++) {
    const batch: Message[] = codingMessages({ count: Math.min(BATCH, entries - done), seed, size: "small" });
    const at = done / entries;
    if (done === 0) batch[5] = textMessage(Role.ROLE_USER, "The invoice total is off by one cent: ticket BILL-4821, see the ledger export.");
    // The planted path: in 10 messages spread evenly over the history.
    if (Math.floor(at * 10) !== Math.floor(((done + batch.length) / entries) * 10) || done === 0) {
      batch[17] = textMessage(Role.ROLE_USER, "Rounding is wrong in src/billing/invoice_rounding.ts, please fix it.");
    }
    await client.appendMessages({ session, messages: batch });
    done += batch.length;
    onBatch();
  }
}

async function measure(client: ContextdClient, sessionId: string, queries: Query[], rounds: number, order: SearchOrder) {
  const latencies: number[] = [];
  const perQuery: Record<string, number[]> = {};
  const hits: Record<string, number> = {};
  for (let r = 0; r < rounds; r++) {
    for (const q of queries) {
      const started = performance.now();
      const res = await client.searchTranscript({ session: { sessionId }, query: q.query, order, pageSize: PAGE });
      const ms = performance.now() - started;
      latencies.push(ms);
      (perQuery[q.name] ??= []).push(ms);
      hits[q.name] = res.hits.length;
    }
  }
  return { all: summarize(latencies), perQuery: Object.fromEntries(Object.entries(perQuery).map(([k, v]) => [k, summarize(v)])), hits };
}

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const entries = ctx.quick ? 10_000 : 100_000;
  const rounds = ctx.quick ? 5 : 40;
  const pgDb = await tryBenchDatabase();
  const withPg = typeof pgDb !== "string";
  const batches = Math.ceil(entries / BATCH);
  const totalSteps = batches * (withPg ? 2 : 1) + (withPg ? 4 : 2);
  let steps = 0;
  const step = (what: string) => ctx.progress.update(++steps, totalSteps, what);
  ctx.progress.update(0, totalSteps, "building the session");

  // A generated ticket and a common word, from the same messages the session is built of.
  const sample = codingMessages({ count: 50, seed: 7000, size: "small" });
  const sampleText = JSON.stringify(sample);
  const ticket = /PAY-\d{4}/.exec(sampleText)?.[0] ?? "PAY-1000";
  const queries: Query[] = [
    { name: "planted ticket", query: "BILL-4821" },
    { name: "planted path", query: "invoice_rounding.ts" },
    { name: "generated ticket", query: ticket },
    { name: "common word", query: "test" },
  ];

  const servers: { name: string; cd: ContextdHandle; client: ContextdClient }[] = [];
  try {
    const cd = await startContextd();
    servers.push({ name: "sqlite", cd, client: sessionClient(cd.address) });
    if (withPg) {
      const pgCd = await startContextd({ config: { store: pgDb.url } });
      servers.push({ name: "postgres", cd: pgCd, client: sessionClient(pgCd.address) });
    }
    const results: Record<string, { newest: Awaited<ReturnType<typeof measure>>; relevance: Awaited<ReturnType<typeof measure>>; buildS: number }> = {};
    for (const s of servers) {
      const t0 = performance.now();
      await build(s.client, "search-100k", entries, () => step(`building the ${s.name} session`));
      const buildS = (performance.now() - t0) / 1000;
      // Warm-up, then the measured rounds.
      await measure(s.client, "search-100k", queries, 1, SearchOrder.SEARCH_ORDER_NEWEST);
      const newest = await measure(s.client, "search-100k", queries, rounds, SearchOrder.SEARCH_ORDER_NEWEST);
      step(`searching ${s.name}`);
      const relevance = await measure(s.client, "search-100k", queries, Math.max(2, Math.floor(rounds / 4)), SearchOrder.SEARCH_ORDER_RELEVANCE);
      step(`searching ${s.name} by relevance`);
      results[s.name] = { newest, relevance, buildS };
    }
    const sqlite = results.sqlite;
    const pg = results.postgres;
    const row = (store: string, order: string, r: Awaited<ReturnType<typeof measure>>) =>
      queries.map((q) => [store, order, q.name, r.hits[q.name], round(r.perQuery[q.name].p50, 2), round(r.perQuery[q.name].p99, 2)]);
    return {
      metrics: {
        search_p50_ms_100k: round(sqlite.newest.all.p50, 2),
        search_p99_ms_100k: round(sqlite.newest.all.p99, 2),
        search_relevance_p50_ms_100k: round(sqlite.relevance.all.p50, 2),
        postgres_search_p50_ms_100k: pg ? round(pg.newest.all.p50, 2) : null,
        postgres_search_relevance_p50_ms_100k: pg ? round(pg.relevance.all.p50, 2) : null,
        entries,
        build_msgs_per_s: round(entries / sqlite.buildS, 0),
        postgres_build_msgs_per_s: pg ? round(entries / pg.buildS, 0) : null,
        hits: sqlite.newest.hits,
        postgres: pg ? undefined : { unavailable: pgDb as string },
      },
      goals: [{ key: "search_p50_ms_100k", op: "<=", target: 20 }],
      headline: ["search_relevance_p50_ms_100k", "postgres_search_p50_ms_100k", "postgres_search_relevance_p50_ms_100k"],
      notes: [
        `one session of ${entries} entries (small coding messages, appended ${BATCH} a call with the index on); first pages of ${PAGE} hits; ${rounds} rounds of the ${queries.length} queries newest first, a quarter as many by relevance; medians over every query of the mix`,
        ...(ctx.quick ? ["--quick: 10k entries, not 100k: the keys keep their names but say nothing about 100k"] : []),
        withPg ? "PostgreSQL: a second contextd on a scratch database of the local server" : `PostgreSQL: not measured: ${pgDb as string}`,
      ],
      tables: [
        {
          title: `search: first page of SearchTranscript over a ${entries}-entry session`,
          headers: ["store", "order", "query", "hits on the page", "p50 ms", "p99 ms"],
          rows: [
            ...row("sqlite", "newest", sqlite.newest),
            ...row("sqlite", "relevance", sqlite.relevance),
            ...(pg ? [...row("postgres", "newest", pg.newest), ...row("postgres", "relevance", pg.relevance)] : []),
          ],
        },
      ],
    };
  } finally {
    for (const s of servers) {
      s.client.close();
      await s.cd.stop();
    }
    if (withPg) await pgDb.drop();
  }
}

export const search: Scenario = {
  name: "search",
  title: "SearchTranscript over a 100k-entry session: first page newest first and by relevance, SQLite and PostgreSQL",
  run,
};
