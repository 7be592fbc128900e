/**
 * compaction_quality: how much answer-bearing information survives incremental compaction, on the
 * LoCoMo conversations (category 5, which has no answer, left out). Each conversation is replayed
 * session by session into its own contextd session per budget — AppendMessages with the session's
 * turns, then Assemble at the budget (auto-compaction on) — and the context of the LAST Assemble is
 * scored: the share of questions whose normalized answer occurs in it as whole words, and the share
 * whose evidence turns all occur in it verbatim (normalized).
 *
 * Methods: `legacy` (extractive summarizer) through a real contextd; `lossless` (engines/lossless,
 * dist/engines/lossless/main.js) through a contextd whose slot selects it, when it has been built;
 * `openai`, the legacy engine with the `openai` summarizer, through a contextd pointed at
 * BENCH_OPENAI_BASE_URL with BENCH_OPENAI_MODEL and the key in the variable BENCH_OPENAI_API_KEY_ENV
 * names (default OPENAI_API_KEY) — only when BENCH_OPENAI_BASE_URL is set (skipped, and said so,
 * otherwise), since it calls a real model for every compaction;
 * `truncation`, the newest messages that fit the budget, computed here with the same tokenizer
 * (o200k_base, the counts contextd stores). Every score is reported beside the tokens it used; the
 * table also scores truncation cut to the tokens legacy used, for a like-for-like comparison.
 */
import fs from "node:fs";
import path from "node:path";
import { messageText } from "../../src/contract/messages.js";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import { sessionClient, type ContextdClient } from "../harness/clients.js";
import { startContextd, type ContextdHandle } from "../harness/contextd.js";
import { losslessBuilt, startLossless, type EngineHandle } from "../harness/engines.js";
import { loadLocomo, locomoPath, normalize, score, type Conversation } from "../harness/locomo.js";
import { makeTempDir } from "../harness/processes.js";
import type { Scenario, ScenarioContext, ScenarioResult, Table } from "../harness/scenario.js";
import { ratio, round } from "../harness/stats.js";

type Method = "legacy" | "lossless" | "openai" | "truncation";
type Served = Exclude<Method, "truncation">;

/** The `openai` row's contextd settings from the environment, or why the row is skipped. */
function openaiSetup(env: NodeJS.ProcessEnv): { config: Record<string, unknown> } | { skipped: string } {
  const baseUrl = env.BENCH_OPENAI_BASE_URL;
  if (!baseUrl) return { skipped: "skipped: set BENCH_OPENAI_BASE_URL (and BENCH_OPENAI_MODEL, BENCH_OPENAI_API_KEY_ENV) to run it" };
  const model = env.BENCH_OPENAI_MODEL;
  if (!model) return { skipped: "skipped: BENCH_OPENAI_BASE_URL is set but BENCH_OPENAI_MODEL is not" };
  const keyEnv = env.BENCH_OPENAI_API_KEY_ENV || "OPENAI_API_KEY";
  if (!env[keyEnv]) return { skipped: `skipped: the API key variable ${keyEnv} (BENCH_OPENAI_API_KEY_ENV) is not set` };
  return {
    config: {
      compaction: { summarizer: { kind: "openai", base_url: baseUrl, model, api_key_env: keyEnv } },
      // A model takes seconds per summary: give the auto-compacting Assembles room for it.
      engines: { timeouts: { assemble: "10m" } },
    },
  };
}
interface Tally {
  answers: number;
  evidence: number;
  questions: number;
  withEvidence: number;
  tokens: number;
  runs: number;
}
const emptyTally = (): Tally => ({ answers: 0, evidence: 0, questions: 0, withEvidence: 0, tokens: 0, runs: 0 });

function add(t: Tally, context: string, tokens: number, conv: Conversation): void {
  const s = score(normalize(context), conv.questions);
  t.answers += s.answers;
  t.evidence += s.evidence;
  t.withEvidence += s.withEvidence;
  t.questions += conv.questions.length;
  t.tokens += tokens;
  t.runs++;
}

/** The newest messages whose stored counts fit `budget`. */
function truncate(messages: Message[], counts: number[], budget: number): { text: string; tokens: number } {
  let tokens = 0;
  let i = messages.length;
  while (i > 0 && tokens + counts[i - 1] <= budget) tokens += counts[--i];
  return { text: messages.slice(i).map(messageText).join("\n"), tokens };
}

interface Replayed {
  text: string;
  tokens: number;
  finalEngine: string;
  fallbacks: number;
  /** Compactions by the summarizer that wrote them (`details.summarizer`). */
  summarizers: Record<string, number>;
}

async function replay(client: ContextdClient, conv: Conversation, budget: number, method: string, engine: string, timeoutMs?: number): Promise<Replayed> {
  const session = { sessionId: `locomo-${method}-${conv.id}-${budget}`, agentId: "bench" };
  let last: Awaited<ReturnType<ContextdClient["assemble"]>> | undefined;
  let fallbacks = 0;
  const summarizers: Record<string, number> = {};
  for (const messages of conv.sessions) {
    if (!messages.length) continue;
    await client.appendMessages({ session, messages });
    last = await client.assemble({ session, tokenBudget: budget }, timeoutMs ? { timeoutMs } : undefined);
    if (last.engineId !== engine) fallbacks++;
    const by = last.compaction?.details?.summarizer;
    if (typeof by === "string") summarizers[by] = (summarizers[by] ?? 0) + 1;
  }
  if (!last) throw new Error(`conversation ${conv.id} has no turns`);
  const text = [last.systemPromptAddition, ...last.messages.map(messageText)].filter(Boolean).join("\n");
  return { text, tokens: last.estimatedTokens, finalEngine: last.engineId, fallbacks, summarizers };
}

/** Runs `fns` with at most `limit` at a time. */
async function pool(fns: Array<() => Promise<void>>, limit: number): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < fns.length) await fns[next++]();
  }));
}

const pct = (n: number, d: number) => (d ? round((100 * n) / d, 1) : null);

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const file = locomoPath();
  if (!fs.existsSync(file)) {
    return {
      metrics: { survival_legacy: null, survival_lossless: null, survival_openai: null, survival_truncation: null, survival_ratio_vs_truncation: null, reason: `LoCoMo not found at ${file} (set BENCH_LOCOMO)` },
      goals: [{ key: "survival_ratio_vs_truncation", op: ">=", target: 2.0 }],
      notes: [`LoCoMo not found at ${file}: nothing measured`],
    };
  }
  const all = loadLocomo(file);
  const convs = ctx.quick ? all.slice(0, 2) : all;
  const budgets = ctx.quick ? [8_000] : [4_000, 8_000, 16_000];
  const tokenizer = createTokenizer("o200k_base");
  const tallies: Record<Method, Record<number, Tally>> = { legacy: {}, lossless: {}, openai: {}, truncation: {} };
  const truncAtLegacy: Record<number, Tally> = {};
  for (const m of Object.keys(tallies) as Method[]) for (const b of budgets) tallies[m][b] = emptyTally();
  for (const b of budgets) truncAtLegacy[b] = emptyTally();

  // Truncation baseline, with the counts contextd stores (countMessage at append).
  const flat = new Map(convs.map((c) => [c.id, c.sessions.flat()]));
  const counts = new Map(convs.map((c) => [c.id, flat.get(c.id)!.map((m) => tokenizer.countMessage(m))]));
  for (const c of convs) for (const b of budgets) {
    const t = truncate(flat.get(c.id)!, counts.get(c.id)!, b);
    add(tallies.truncation[b], t.text, t.tokens, c);
  }
  // The ceiling: the whole conversation in context (answers that are paraphrases never match).
  const ceiling = emptyTally();
  for (const c of convs) add(ceiling, flat.get(c.id)!.map(messageText).join("\n"), counts.get(c.id)!.reduce((a, b) => a + b, 0), c);

  const processes: Array<ContextdHandle | EngineHandle> = [];
  const clients: ContextdClient[] = [];
  const methods: Array<{ method: Served; engine: string; client: ContextdClient; timeoutMs?: number }> = [];
  const owners: Array<{ process: ContextdHandle | EngineHandle; method: Served }> = [];
  let losslessReason = "";
  const openai = openaiSetup(process.env);
  let openaiReason = "skipped" in openai ? openai.skipped : "";
  const openaiSummarizers: Record<string, number> = {};
  try {
    ctx.progress.update(0, 1, "starting contextd (legacy)");
    const legacyCd = await startContextd();
    processes.push(legacyCd);
    owners.push({ process: legacyCd, method: "legacy" });
    clients.push(sessionClient(legacyCd.address));
    methods.push({ method: "legacy", engine: "legacy", client: clients[0] });
    if (!losslessBuilt()) losslessReason = "engine not built";
    else {
      try {
        ctx.progress.update(0, 1, "starting contextd (lossless) and the lossless engine");
        const cd = await startContextd({ config: { slots: { context_engine: "lossless" } } });
        processes.push(cd);
        owners.push({ process: cd, method: "lossless" });
        const dir = makeTempDir("lossless");
        const engine = await startLossless(cd.address, path.join(dir, "lossless.db"));
        processes.push(engine);
        owners.push({ process: engine, method: "lossless" });
        const client = sessionClient(cd.address);
        clients.push(client);
        methods.push({ method: "lossless", engine: "lossless", client });
      } catch (err) {
        losslessReason = `engine failed to start: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`;
      }
    }
    if ("config" in openai) {
      try {
        ctx.progress.update(0, 1, "starting contextd (legacy with the openai summarizer)");
        const cd = await startContextd({ config: openai.config });
        processes.push(cd);
        owners.push({ process: cd, method: "openai" });
        const client = sessionClient(cd.address);
        clients.push(client);
        methods.push({ method: "openai", engine: "legacy", client, timeoutMs: 600_000 });
      } catch (err) {
        openaiReason = `contextd failed to start: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`;
      }
    }

    const failures: Record<Served, string[]> = { legacy: [], lossless: [], openai: [] };
    const tasks: Array<() => Promise<void>> = [];
    let done = 0;
    const total = methods.length * convs.length * budgets.length;
    // Interleaved: conversation by conversation, the methods and budgets alternate in the queue.
    for (const c of convs) for (const b of budgets) for (const { method, engine, client, timeoutMs } of methods) {
      tasks.push(async () => {
        try {
          const r = await replay(client, c, b, method, engine, timeoutMs);
          if (method === "openai") for (const [k, n] of Object.entries(r.summarizers)) openaiSummarizers[k] = (openaiSummarizers[k] ?? 0) + n;
          if (r.finalEngine !== engine) failures[method].push(`${c.id}@${b}: final context from ${r.finalEngine}`);
          else if (r.fallbacks) failures[method].push(`${c.id}@${b}: ${r.fallbacks} Assemble answers from another engine`);
          add(tallies[method][b], r.text, r.tokens, c);
          if (method === "legacy") {
            const t = truncate(flat.get(c.id)!, counts.get(c.id)!, r.tokens);
            add(truncAtLegacy[b], t.text, t.tokens, c);
          }
        } catch (err) {
          failures[method].push(`${c.id}@${b}: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
        }
        ctx.progress.update(++done, total, `replaying ${convs.length} conversations`);
      });
    }
    await pool(tasks, 4);
    for (const { process: p, method } of owners) {
      const child = p.child;
      if (!child.isRunning()) failures[method].unshift(`process ${child.pid} exited; its last output: ${child.output().slice(-1500)}`);
    }
    if (failures.legacy.length) throw new Error(`legacy replay failed: ${failures.legacy.slice(0, 3).join("; ")}`);
    if (methods.some((m) => m.method === "lossless") && failures.lossless.length) {
      losslessReason = `${failures.lossless.length} of ${convs.length * budgets.length} replays not served by lossless: ${failures.lossless.slice(0, 2).join("; ")}`;
    }
    if (methods.some((m) => m.method === "openai") && failures.openai.length) {
      openaiReason = `${failures.openai.length} of ${convs.length * budgets.length} replays failed: ${failures.openai.slice(0, 2).join("; ")}`;
    }
  } finally {
    for (const c of clients) c.close();
    for (const p of processes.reverse()) await ("stop" in p ? p.stop() : p.child.stop());
  }

  const share = (t: Tally) => (t.questions ? t.answers / t.questions : Number.NaN);
  const at = 8_000;
  const losslessOk = !losslessReason;
  const openaiOk = !openaiReason;
  const survival = {
    legacy: share(tallies.legacy[at]),
    lossless: losslessOk ? share(tallies.lossless[at]) : Number.NaN,
    truncation: share(tallies.truncation[at]),
  };
  const best = Math.max(survival.legacy, losslessOk ? survival.lossless : -1);
  const byBudget = (m: Method) => Object.fromEntries(budgets.map((b) => [b, { survival: round(share(tallies[m][b]), 3), avg_tokens: round(tallies[m][b].tokens / Math.max(1, tallies[m][b].runs), 0) }]));
  const rows: Table["rows"] = [];
  for (const b of budgets) {
    const line = (name: string, t: Tally, ok = true) => rows.push([b, name, ok ? pct(t.answers, t.questions) : null, ok ? pct(t.evidence, t.withEvidence) : null, ok ? round(t.tokens / Math.max(1, t.runs), 0) : null]);
    line("legacy (extractive)", tallies.legacy[b]);
    line("lossless", tallies.lossless[b], losslessOk);
    line(openaiOk ? "legacy (openai summarizer)" : "legacy (openai summarizer): skipped", tallies.openai[b], openaiOk);
    line("truncation (newest that fit)", tallies.truncation[b]);
    line("truncation at legacy's tokens", truncAtLegacy[b]);
  }
  rows.push(["none", "whole conversation (ceiling)", pct(ceiling.answers, ceiling.questions), pct(ceiling.evidence, ceiling.withEvidence), round(ceiling.tokens / Math.max(1, ceiling.runs), 0)]);
  const questions = convs.reduce((a, c) => a + c.questions.length, 0);
  return {
    metrics: {
      survival_legacy: round(survival.legacy, 3),
      survival_lossless: losslessOk ? round(survival.lossless, 3) : null,
      ...(losslessOk ? {} : { survival_lossless_reason: losslessReason }),
      survival_openai: openaiOk ? round(share(tallies.openai[at]), 3) : null,
      ...(openaiOk ? { openai_compactions_by_summarizer: openaiSummarizers } : { survival_openai_reason: openaiReason }),
      survival_truncation: round(survival.truncation, 3),
      survival_ratio_vs_truncation: round(ratio(best, survival.truncation), 2),
      survival_at_budget: at,
      survival_whole_conversation: round(share(ceiling), 3),
      by_budget: { legacy: byBudget("legacy"), lossless: losslessOk ? byBudget("lossless") : null, openai: openaiOk ? byBudget("openai") : null, truncation: byBudget("truncation"), truncation_at_legacy_tokens: Object.fromEntries(budgets.map((b) => [b, round(share(truncAtLegacy[b]), 3)])) },
      conversations: convs.length,
      questions,
      budgets,
    },
    goals: [{ key: "survival_ratio_vs_truncation", op: ">=", target: 2.0 }],
    headline: ["survival_legacy", "survival_lossless", "survival_truncation", "survival_whole_conversation"],
    notes: [
      `${convs.length} LoCoMo conversations${ctx.quick ? " (--quick: the first 2, budget 8k only)" : ""}, ${questions} questions (category 5 left out); survival_* keys are at the ${at}-token budget; the ratio is the best engine against truncation there`,
      "survival_whole_conversation is the ceiling: the share found in the whole, uncompacted conversation (an answer that is a paraphrase — e.g. a date computed from \"yesterday\" — is never found verbatim)",
      "answer survival: the normalized answer (lowercase, punctuation and articles removed, whitespace collapsed) occurs as whole words in the final assembled context; evidence: every evidence turn of the question occurs in it",
      ...(losslessOk ? [] : [`lossless: ${losslessReason}`]),
      openaiOk
        ? `openai: legacy with the openai summarizer (${process.env.BENCH_OPENAI_MODEL} at ${process.env.BENCH_OPENAI_BASE_URL}); compactions reported by its Assembles, by the summarizer that wrote them: ${JSON.stringify(openaiSummarizers)} (extractive: the model failed and the summary fell back)`
        : `openai: ${openaiReason}`,
      "LoCoMo (CC BY-NC 4.0) is read at run time from the shared data directory; nothing of it is stored in the repository or in the report",
    ],
    tables: [{ title: "compaction_quality: LoCoMo, final context after incremental compaction", headers: ["budget", "method", "answers survive %", "evidence survives %", "avg tokens used"], rows }],
  };
}

export const compactionQuality: Scenario = {
  name: "compaction_quality",
  title: "Share of LoCoMo answers still in the assembled context after incremental compaction at 4k/8k/16k: legacy vs lossless vs truncation",
  run,
};
