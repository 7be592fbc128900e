/**
 * prompt_cache: how much of each model call's prompt a provider's prompt cache can serve when an
 * agent loop takes its context from contextd, per shipped engine — and what the input then costs.
 *
 * The loop, as a runtime runs it: before every model call (every assistant message of the
 * conversation) one SessionService.Assemble at the budget (auto-compaction on, no prompt, so the
 * engine sees the latest user message), whose answer is the prompt; then the model's message and
 * whatever follows it (tool result, next user message) are appended. Two conversations:
 * - **coding** (the goal keys): a generated ~150k-token coding session with tool calls
 *   (codingMessages), budget 32,000 — ~120 model calls per engine;
 * - **locomo**: LoCoMo conversations (BENCH_LOCOMO), each assistant turn a model call, budget 8,000
 *   (at 32k these conversations never compact, and reuse would only say "append-only").
 *
 * Per call (bench/harness/prompt-cache.ts): the reused prefix is the system prompt addition, if
 * unchanged, plus the leading messages identical to the previous call's; `cache_hit_ratio_<engine>`
 * is reused tokens over all prompt tokens, `input_cost_ratio_<engine>` the input cost under
 * Anthropic's cache prices over the cost without a cache (`input_cost_ratio_openai_<engine>`: under
 * OpenAI's). `cache_hit_ratio_worst_engine` is the lowest engine's, and null when an engine could
 * not be measured (never a best-of-the-rest).
 *
 * Every call also checks AssembleResponse.stable_prefix_messages — the host's word on where the
 * cacheable prefix ends — against the measured one (`stable_prefix_hint_mismatches_<engine>`: 0).
 *
 * Engines: legacy, lossless, window and recall, each through its own contextd the way a user runs
 * it (bench/harness/quality-methods.ts).
 *
 * Model spend: the coding loop once more per engine, now with contextd's summarizer a model (the
 * `openai` summarizer against bench/harness/summary-model.ts, a chat-completions stand-in that
 * answers with an extract of what it is asked to summarize). Every engine then calls a model: legacy
 * for its compaction summaries, window and recall through the host compaction they delegate to,
 * lossless through HostService.Complete for its leaf and condensed summaries.
 * `model_calls_per_100_turns_<engine>` and `model_tokens_per_100_turns_<engine>` are the requests
 * the model answered and the tokens it reported (prompt + completion) per 100 agent model calls
 * (Assembles) of the loop.
 */
import fs from "node:fs";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import type { Tokenizer } from "../../src/tokens/tokenizer.js";
import { loadLocomo, locomoPath } from "../harness/locomo.js";
import { codingMessages } from "../harness/messages.js";
import { anthropicCostRatio, openaiCostRatio, PrefixMeter, prefixReuse, type CallReuse } from "../harness/prompt-cache.js";
import { startMethods, stopMethods, type Served, type ServedMethod } from "../harness/quality-methods.js";
import { startSummaryModel } from "../harness/summary-model.js";
import type { Scenario, ScenarioContext, ScenarioResult, Table } from "../harness/scenario.js";
import { round } from "../harness/stats.js";

const CODING_BUDGET = 32_000;
const LOCOMO_BUDGET = 8_000;
const ENGINES: Served[] = ["legacy", "window", "recall", "lossless"];

/** One engine's run of one conversation. */
interface Run {
  calls: CallReuse[];
  compactions: number;
  /** Answers from another engine than the method's (a fallback would measure legacy, not it). */
  fallbacks: string[];
  /** Calls whose AssembleResponse.stable_prefix_messages differs from the measured identical prefix. */
  hintMismatches: number;
}

/** A coding session of at least `targetTokens` (whole turns), deterministic for the seed. */
function codingSession(targetTokens: number, tokenizer: Tokenizer): Message[] {
  for (let count = Math.ceil(targetTokens / 400); ; count = Math.ceil(count * 1.3)) {
    const msgs = codingMessages({ count, seed: 7 });
    const tokens = msgs.reduce((a, m) => a + tokenizer.countMessage(m), 0);
    if (tokens >= targetTokens) return msgs;
  }
}

/**
 * The agent loop over `messages` in session `sessionId`: an Assemble before every assistant
 * message, its answer measured as that call's prompt.
 */
async function loop(m: ServedMethod, sessionId: string, messages: Message[], budget: number, tokenizer: Tokenizer): Promise<Run> {
  const session = { sessionId, agentId: "bench" };
  const meter = new PrefixMeter(tokenizer);
  const run: Run = { calls: meter.calls, compactions: 0, fallbacks: [], hintMismatches: 0 };
  let pending: Message[] = [];
  for (const msg of messages) {
    if (msg.role === Role.ROLE_ASSISTANT && pending.length) {
      await m.client.appendMessages({ session, messages: pending });
      pending = [];
      const a = await m.client.assemble({ session, tokenBudget: budget }, m.timeoutMs ? { timeoutMs: m.timeoutMs } : undefined);
      if (a.engineId !== m.engine) run.fallbacks.push(`${sessionId}: call ${meter.calls.length + 1} answered by ${a.engineId} (${a.fallbackReason})`);
      if (a.compaction) run.compactions++;
      const measured = meter.add({ systemPromptAddition: a.systemPromptAddition, messages: a.messages });
      if (a.stablePrefixMessages !== measured.reusedMessages) run.hintMismatches++;
    }
    pending.push(msg);
  }
  return run;
}

/** The environment variable holding the stand-in model's API key (it takes any). */
const MODEL_KEY_ENV = "BENCH_SUMMARY_MODEL_KEY";

interface Spend {
  turns: number;
  calls: number;
  tokens: number;
}

/**
 * The coding loop per engine with a model as contextd's summarizer: what each engine spent on it.
 * `reasons` gets why an engine could not be measured.
 */
async function modelSpend(
  ctx: ScenarioContext,
  coding: Message[],
  tokenizer: Tokenizer,
  reasons: Partial<Record<Served, string>>,
): Promise<Partial<Record<Served, Spend>>> {
  const model = await startSummaryModel();
  process.env[MODEL_KEY_ENV] ??= "sk-bench-standin";
  const out: Partial<Record<Served, Spend>> = {};
  try {
    const compaction = { summarizer: { kind: "openai", base_url: model.baseUrl, model: "bench-summarizer", api_key_env: MODEL_KEY_ENV } };
    const { methods: started, reasons: notStarted } = await startMethods((what) => ctx.progress.update(0, 1, `model spend: ${what}`), { compaction });
    for (const m of ENGINES) if (notStarted[m]) reasons[m] ??= `model spend: ${notStarted[m]}`;
    try {
      const methods = started.filter((m) => ENGINES.includes(m.method));
      for (const [i, m] of methods.entries()) {
        ctx.progress.update(i, methods.length, `${m.method}: coding session with a model summarizer`);
        const before = model.spent();
        try {
          const r = await loop(m, `cache-model-${m.method}`, coding, CODING_BUDGET, tokenizer);
          if (r.fallbacks.length) reasons[m.method] ??= `model spend: ${r.fallbacks.length} answers from another engine, e.g. ${r.fallbacks[0]}`;
          else {
            const after = model.spent();
            out[m.method] = { turns: r.calls.length, calls: after.calls - before.calls, tokens: after.tokens - before.tokens };
          }
        } catch (err) {
          reasons[m.method] ??= `model spend failed: ${firstLine(err)}`;
        }
      }
    } finally {
      await stopMethods(started);
    }
  } finally {
    await model.close();
  }
  return out;
}

const num = (v: number, digits = 3) => (Number.isFinite(v) ? round(v, digits) : null);
const firstLine = (err: unknown) => (err instanceof Error ? err.message.split("\n")[0] : String(err));

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const goals = [
    { key: "cache_hit_ratio_worst_engine", op: ">=" as const, target: 0.85 },
    { key: "input_cost_ratio_worst_engine", op: "<=" as const, target: 0.3 },
    { key: "cache_hit_ratio_legacy", op: ">=" as const, target: 0.9 },
  ];
  const tokenizer = createTokenizer("o200k_base");
  const coding = codingSession(ctx.quick ? 50_000 : 150_000, tokenizer);
  const codingTokens = coding.reduce((a, m) => a + tokenizer.countMessage(m), 0);
  const file = locomoPath();
  // --quick leaves LoCoMo out: its ~300 calls per conversation and engine would double CI's bench time.
  const locomo = !ctx.quick && fs.existsSync(file) ? loadLocomo(file).slice(0, 3) : [];

  const { methods: started, reasons } = await startMethods((what) => ctx.progress.update(0, 1, what));
  const methods = started.filter((m) => ENGINES.includes(m.method));
  const codingRuns: Partial<Record<Served, Run>> = {};
  const locomoRuns: Partial<Record<Served, Run>> = {};
  try {
    const total = methods.length * (1 + locomo.length);
    let done = 0;
    // One engine at a time, so a slow Python sidecar is not measured under the others' load.
    for (const m of methods) {
      try {
        ctx.progress.update(done, total, `${m.method}: coding session, ${Math.round(codingTokens / 1000)}k tokens at ${CODING_BUDGET / 1000}k`);
        codingRuns[m.method] = await loop(m, `cache-coding-${m.method}`, coding, CODING_BUDGET, tokenizer);
        done++;
        const merged: Run = { calls: [], compactions: 0, fallbacks: [], hintMismatches: 0 };
        for (const conv of locomo) {
          ctx.progress.update(done, total, `${m.method}: LoCoMo ${conv.id} at ${LOCOMO_BUDGET / 1000}k`);
          const r = await loop(m, `cache-locomo-${m.method}-${conv.id}`, conv.sessions.flat(), LOCOMO_BUDGET, tokenizer);
          merged.calls.push(...r.calls);
          merged.compactions += r.compactions;
          merged.fallbacks.push(...r.fallbacks);
          merged.hintMismatches += r.hintMismatches;
          done++;
        }
        if (locomo.length) locomoRuns[m.method] = merged;
      } catch (err) {
        reasons[m.method] = `failed: ${firstLine(err)}`;
      }
      if (!m.processes.every((p) => p.child.isRunning())) reasons[m.method] ??= "a process of it exited during the run";
    }
  } finally {
    await stopMethods(started);
  }
  for (const m of ENGINES) {
    const fallbacks = [...(codingRuns[m]?.fallbacks ?? []), ...(locomoRuns[m]?.fallbacks ?? [])];
    if (fallbacks.length) reasons[m] ??= `${fallbacks.length} answers from another engine, e.g. ${fallbacks[0]}`;
  }
  if (reasons.legacy) throw new Error(`legacy: ${reasons.legacy}`);
  const spendReasons: Partial<Record<Served, string>> = {};
  const spend = await modelSpend(ctx, coding, tokenizer, spendReasons);

  const measured = (m: Served) => !reasons[m] && codingRuns[m] !== undefined;
  const metrics: Record<string, unknown> = {};
  const rows: Table["rows"] = [];
  for (const m of ENGINES) {
    const c = measured(m) ? codingRuns[m] : undefined;
    const l = measured(m) ? locomoRuns[m] : undefined;
    metrics[`cache_hit_ratio_${m}`] = c ? num(prefixReuse(c.calls)) : null;
    metrics[`input_cost_ratio_${m}`] = c ? num(anthropicCostRatio(c.calls)) : null;
    metrics[`input_cost_ratio_openai_${m}`] = c ? num(openaiCostRatio(c.calls)) : null;
    metrics[`compactions_${m}`] = c ? c.compactions : null;
    metrics[`stable_prefix_hint_mismatches_${m}`] = c ? c.hintMismatches + (l?.hintMismatches ?? 0) : null;
    metrics[`cache_hit_ratio_locomo_${m}`] = l ? num(prefixReuse(l.calls)) : null;
    metrics[`input_cost_ratio_locomo_${m}`] = l ? num(anthropicCostRatio(l.calls)) : null;
    if (!c) {
      rows.push([m, `not measured: ${reasons[m] ?? "not run"}`, null, null, null, null, null, null]);
      continue;
    }
    rows.push([
      m,
      c.calls.length,
      num(prefixReuse(c.calls)),
      num(anthropicCostRatio(c.calls)),
      num(openaiCostRatio(c.calls)),
      c.compactions,
      l ? num(prefixReuse(l.calls)) : null,
      l ? num(anthropicCostRatio(l.calls)) : null,
    ]);
  }
  const all = ENGINES.every(measured);
  const worst = (key: (m: Served) => string, pickWorst: (xs: number[]) => number) => (all ? pickWorst(ENGINES.map((m) => metrics[key(m)] as number)) : null);
  metrics.cache_hit_ratio_worst_engine = worst(
    (m) => `cache_hit_ratio_${m}`,
    (xs) => Math.min(...xs),
  );
  metrics.input_cost_ratio_worst_engine = worst(
    (m) => `input_cost_ratio_${m}`,
    (xs) => Math.max(...xs),
  );
  const spendRows: Table["rows"] = [];
  for (const m of ENGINES) {
    const sp = spend[m];
    const per100 = (v: number) => (sp && sp.turns ? num((v * 100) / sp.turns, 1) : null);
    metrics[`model_calls_per_100_turns_${m}`] = sp ? per100(sp.calls) : null;
    metrics[`model_tokens_per_100_turns_${m}`] = sp ? per100(sp.tokens) : null;
    spendRows.push(
      sp
        ? [m, sp.turns, sp.calls, sp.tokens, per100(sp.calls), per100(sp.tokens)]
        : [m, `not measured: ${spendReasons[m] ?? "not run"}`, null, null, null, null],
    );
  }
  metrics.coding_session_tokens = codingTokens;
  metrics.coding_calls = codingRuns.legacy?.calls.length ?? null;
  metrics.locomo_conversations = locomo.length;
  metrics.missing = { ...reasons, ...Object.fromEntries(Object.entries(spendReasons).map(([m, why]) => [`model_spend_${m}`, why])) };

  return {
    metrics,
    goals,
    headline: ENGINES.flatMap((m) => [`cache_hit_ratio_${m}`, `input_cost_ratio_${m}`]),
    notes: [
      `coding: a generated ${Math.round(codingTokens / 1000)}k-token coding session with tool calls, an Assemble at ${CODING_BUDGET} tokens before each of its ${metrics.coding_calls} model calls; the goal keys are this conversation's`,
      locomo.length
        ? `locomo: ${locomo.length} LoCoMo conversation${locomo.length > 1 ? "s" : ""} (CC BY-NC 4.0, read at run time), an Assemble at ${LOCOMO_BUDGET} tokens before each assistant turn`
        : ctx.quick
          ? "locomo: left out by --quick"
          : `locomo: not measured — LoCoMo not found at ${file} (set BENCH_LOCOMO)`,
      "reused = the system prompt addition, if unchanged (the runtime puts it before its system prompt), plus the leading messages identical, as the provider sees them, to the previous call's; cache_hit_ratio = reused tokens ÷ prompt tokens",
      "model spend: the coding loop again with contextd's summarizer a model (the openai summarizer against a chat-completions stand-in that answers with an extract); requests and reported tokens (prompt + completion) per 100 agent model calls — legacy, window and recall through the host's compaction summaries, lossless through HostService.Complete",
      ...Object.entries(spendReasons).map(([m, why]) => `${m}: ${why}`),
      "input cost ÷ cost without a cache: Anthropic (read 0.1×, write 1.25× for every token past the reused prefix); OpenAI (cached 0.1× in 128-token steps, prompts of ≥ 1,024 tokens, no write premium); calls assumed within the cache's lifetime",
      ...Object.entries(reasons).map(([m, why]) => `${m}: ${why}`),
    ],
    tables: [
      {
        title: "prompt_cache: the prompt prefix a provider's cache can serve, per engine",
        headers: [
          "engine",
          "calls (coding)",
          "prefix reused",
          "input cost (Anthropic)",
          "input cost (OpenAI)",
          "compactions",
          "prefix reused (LoCoMo)",
          "input cost (LoCoMo, Anthropic)",
        ],
        rows,
      },
      {
        title: "prompt_cache: what each engine spends on a summarizer model (coding session, 32k)",
        headers: [
          "engine",
          "agent model calls",
          "summarizer model calls",
          "summarizer model tokens",
          "model calls per 100 turns",
          "model tokens per 100 turns",
        ],
        rows: spendRows,
      },
    ],
  };
}

export const promptCache: Scenario = {
  name: "prompt_cache",
  title: "prompt-cache prefix reuse and input cost per engine: an Assemble before every model call of a coding session (32k) and LoCoMo (8k)",
  run,
};
