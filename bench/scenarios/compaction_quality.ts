/**
 * compaction_quality: how much answer-bearing information is in the assembled context after
 * incremental compaction, on the LoCoMo conversations (category 5, which has no answer, left out).
 *
 * Each conversation is replayed session by session into its own contextd session per engine and
 * budget (4k / 8k / 16k; --quick: 8k) — AppendMessages with the session's turns, then Assemble at
 * the budget (auto-compaction on) with no prompt (`prompt: ""`). Then two scores:
 * - **without a prompt**: the context of that last Assemble against every question;
 * - **with the question as the prompt**: for a fixed sample of the questions (every k-th, at most
 *   QUESTIONS_PER_CONVERSATION per conversation; --quick fewer), one more Assemble whose `prompt` is
 *   the question — the question only, never its answer or evidence — scored against that question.
 * Each score: the share of questions whose normalized answer occurs in the context as whole words,
 * the share whose evidence turns all occur in it verbatim (normalized), and the tokens it used.
 *
 * Methods (bench/harness/quality-methods.ts): legacy, lossless, window, recall, openai (only with
 * BENCH_OPENAI_BASE_URL), each through its own contextd; and `truncation`, the newest messages that
 * fit, computed here with the tokenizer contextd stores counts with (o200k_base). The ceiling is the
 * whole conversation (an answer that is a paraphrase is never found verbatim by any engine that does
 * not rewrite text).
 */
import fs from "node:fs";
import { messageText } from "../../src/contract/messages.js";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import type { ContextdClient } from "../harness/clients.js";
import { loadLocomo, locomoPath, normalize, score, type Conversation, type Question } from "../harness/locomo.js";
import { SERVED, startMethods, stopMethods, type Served, type ServedMethod } from "../harness/quality-methods.js";
import type { Scenario, ScenarioContext, ScenarioResult, Table } from "../harness/scenario.js";
import { ratio, round } from "../harness/stats.js";

type Method = Served | "truncation";
const AT = 8_000;
const QUESTIONS_PER_CONVERSATION = 40;

interface Tally {
  answers: number;
  evidence: number;
  questions: number;
  withEvidence: number;
  tokens: number;
  runs: number;
}
const emptyTally = (): Tally => ({ answers: 0, evidence: 0, questions: 0, withEvidence: 0, tokens: 0, runs: 0 });

function add(t: Tally, context: string, tokens: number, questions: Question[]): void {
  const s = score(normalize(context), questions);
  t.answers += s.answers;
  t.evidence += s.evidence;
  t.withEvidence += s.withEvidence;
  t.questions += questions.length;
  t.tokens += tokens;
  t.runs++;
}

/** Every k-th question, at most `max`: spread over the conversation and the categories, the same every run. */
export function sampleQuestions(questions: Question[], max: number): Question[] {
  if (questions.length <= max) return questions;
  const step = questions.length / max;
  return Array.from({ length: max }, (_, i) => questions[Math.floor(i * step)]);
}

/** The newest messages whose stored counts fit `budget`. */
function truncate(messages: Message[], counts: number[], budget: number): { text: string; tokens: number } {
  let tokens = 0;
  let i = messages.length;
  while (i > 0 && tokens + counts[i - 1] <= budget) tokens += counts[--i];
  return { text: messages.slice(i).map(messageText).join("\n"), tokens };
}

type Assembled = Awaited<ReturnType<ContextdClient["assemble"]>>;
const contextText = (a: Assembled) => [a.systemPromptAddition, ...a.messages.map(messageText)].filter(Boolean).join("\n");

/** Replays `conv` at `budget`; answers the last no-prompt Assemble and how many answers came from another engine. */
async function replay(
  m: ServedMethod,
  conv: Conversation,
  budget: number,
): Promise<{ session: { sessionId: string; agentId: string }; last: Assembled; fallbacks: number }> {
  const session = { sessionId: `locomo-${m.method}-${conv.id}-${budget}`, agentId: "bench" };
  let last: Assembled | undefined;
  let fallbacks = 0;
  for (const messages of conv.sessions) {
    if (!messages.length) continue;
    await m.client.appendMessages({ session, messages });
    last = await m.client.assemble({ session, tokenBudget: budget, prompt: "" }, m.timeoutMs ? { timeoutMs: m.timeoutMs } : undefined);
    if (last.engineId !== m.engine) fallbacks++;
  }
  if (!last) throw new Error(`conversation ${conv.id} has no turns`);
  return { session, last, fallbacks };
}

/** Runs `fns` with at most `limit` at a time. */
async function pool(fns: Array<() => Promise<void>>, limit: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < fns.length) await fns[next++]();
    }),
  );
}

const pct = (n: number, d: number) => (d ? round((100 * n) / d, 1) : null);
const share = (t: Tally | undefined) => (t && t.questions ? t.answers / t.questions : Number.NaN);
const evidenceShare = (t: Tally | undefined) => (t && t.withEvidence ? t.evidence / t.withEvidence : Number.NaN);
const num = (v: number, digits = 3) => (Number.isFinite(v) ? round(v, digits) : null);

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const goals = [
    { key: "survival_ratio_vs_truncation", op: ">=" as const, target: 2.0 },
    { key: "survival_recall_vs_ceiling", op: ">=" as const, target: 0.8 },
  ];
  const file = locomoPath();
  if (!fs.existsSync(file))
    return {
      metrics: { survival_ratio_vs_truncation: null, survival_recall_vs_ceiling: null, reason: `LoCoMo not found at ${file} (set BENCH_LOCOMO)` },
      goals,
      notes: [`LoCoMo not found at ${file}: nothing measured`],
    };
  const all = loadLocomo(file);
  const convs = ctx.quick ? all.slice(0, 2) : all;
  const budgets = ctx.quick ? [AT] : [4_000, AT, 16_000];
  const perConversation = ctx.quick ? 12 : QUESTIONS_PER_CONVERSATION;
  const sampled = new Map(convs.map((c) => [c.id, sampleQuestions(c.questions, perConversation)]));
  const tokenizer = createTokenizer("o200k_base");
  const plain: Partial<Record<Method, Record<number, Tally>>> = {};
  const prompted: Partial<Record<Method, Record<number, Tally>>> = {};
  const tally = (t: typeof plain, m: Method, b: number) => ((t[m] ??= {})[b] ??= emptyTally());

  // Truncation and the ceiling, with the counts contextd stores (countMessage at append).
  const flat = new Map(convs.map((c) => [c.id, c.sessions.flat()]));
  const counts = new Map(convs.map((c) => [c.id, flat.get(c.id)!.map((m) => tokenizer.countMessage(m))]));
  const ceiling = emptyTally();
  const ceilingSampled = emptyTally();
  for (const c of convs) {
    for (const b of budgets) {
      const t = truncate(flat.get(c.id)!, counts.get(c.id)!, b);
      add(tally(plain, "truncation", b), t.text, t.tokens, c.questions);
      add(tally(prompted, "truncation", b), t.text, t.tokens, sampled.get(c.id)!);
    }
    const whole = flat.get(c.id)!.map(messageText).join("\n");
    const tokens = counts.get(c.id)!.reduce((a, b) => a + b, 0);
    add(ceiling, whole, tokens, c.questions);
    add(ceilingSampled, whole, tokens, sampled.get(c.id)!);
  }

  const { methods, reasons } = await startMethods((what) => ctx.progress.update(0, 1, what));
  const failures: Partial<Record<Served, string[]>> = {};
  const fail = (m: Served, why: string) => (failures[m] ??= []).push(why);
  try {
    const tasks: Array<() => Promise<void>> = [];
    let done = 0;
    const total = methods.length * convs.length * budgets.length;
    // Interleaved: conversation by conversation, the methods and budgets alternate in the queue.
    for (const c of convs)
      for (const b of budgets)
        for (const m of methods) {
          tasks.push(async () => {
            try {
              const r = await replay(m, c, b);
              if (r.last.engineId !== m.engine) fail(m.method, `${c.id}@${b}: final context from ${r.last.engineId}`);
              else if (r.fallbacks) fail(m.method, `${c.id}@${b}: ${r.fallbacks} Assemble answers from another engine`);
              add(tally(plain, m.method, b), contextText(r.last), r.last.estimatedTokens, c.questions);
              for (const q of sampled.get(c.id)!) {
                const a = await m.client.assemble(
                  { session: r.session, tokenBudget: b, prompt: q.question },
                  m.timeoutMs ? { timeoutMs: m.timeoutMs } : undefined,
                );
                if (a.engineId !== m.engine) fail(m.method, `${c.id}@${b}: a prompted Assemble answered by ${a.engineId}`);
                add(tally(prompted, m.method, b), contextText(a), a.estimatedTokens, [q]);
              }
            } catch (err) {
              fail(m.method, `${c.id}@${b}: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
            }
            ctx.progress.update(++done, total, `replaying ${convs.length} conversations`);
          });
        }
    await pool(tasks, 4);
    for (const m of methods)
      for (const p of m.processes)
        if (!p.child.isRunning()) (failures[m.method] ??= []).unshift(`process ${p.child.pid} exited; its last output: ${p.child.output().slice(-1500)}`);
  } finally {
    await stopMethods(methods);
  }
  if (failures.legacy?.length) throw new Error(`legacy replay failed: ${failures.legacy.slice(0, 3).join("; ")}`);
  for (const m of methods)
    if (failures[m.method]?.length) reasons[m.method] = `${failures[m.method]!.length} problems, e.g. ${failures[m.method]!.slice(0, 2).join("; ")}`;
  const ok = (m: Method) => m === "truncation" || (methods.some((x) => x.method === m) && !reasons[m as Served]);

  const engines = SERVED.filter(ok);
  const best = Math.max(...engines.map((m) => share(plain[m]?.[AT])));
  const recallOk = ok("recall");
  const recallPrompted = recallOk ? share(prompted.recall?.[AT]) : Number.NaN;
  const byBudget = (m: Method) =>
    Object.fromEntries(
      budgets.map((b) => [
        b,
        {
          survival: num(share(plain[m]?.[b])),
          evidence: num(evidenceShare(plain[m]?.[b])),
          avg_tokens: round((plain[m]?.[b]?.tokens ?? 0) / Math.max(1, plain[m]?.[b]?.runs ?? 0), 0),
          survival_with_prompt: num(share(prompted[m]?.[b])),
          evidence_with_prompt: num(evidenceShare(prompted[m]?.[b])),
          avg_tokens_with_prompt: round((prompted[m]?.[b]?.tokens ?? 0) / Math.max(1, prompted[m]?.[b]?.runs ?? 0), 0),
        },
      ]),
    );
  const rows: Table["rows"] = [];
  for (const b of budgets)
    for (const m of [...SERVED, "truncation"] as Method[]) {
      if (!ok(m)) {
        rows.push([b, `${m}: ${reasons[m as Served] ?? "not run"}`, null, null, null, null, null, null]);
        continue;
      }
      const p = plain[m]![b];
      const q = prompted[m]![b];
      rows.push([
        b,
        m,
        pct(p.answers, p.questions),
        pct(p.evidence, p.withEvidence),
        round(p.tokens / Math.max(1, p.runs), 0),
        pct(q.answers, q.questions),
        pct(q.evidence, q.withEvidence),
        round(q.tokens / Math.max(1, q.runs), 0),
      ]);
    }
  rows.push([
    "none",
    "whole conversation (ceiling)",
    pct(ceiling.answers, ceiling.questions),
    pct(ceiling.evidence, ceiling.withEvidence),
    round(ceiling.tokens / Math.max(1, ceiling.runs), 0),
    pct(ceilingSampled.answers, ceilingSampled.questions),
    pct(ceilingSampled.evidence, ceilingSampled.withEvidence),
    null,
  ]);
  const questions = convs.reduce((a, c) => a + c.questions.length, 0);
  const sampledCount = [...sampled.values()].reduce((a, q) => a + q.length, 0);
  return {
    metrics: {
      ...Object.fromEntries(SERVED.map((m) => [`survival_${m}`, ok(m) ? num(share(plain[m]?.[AT])) : null])),
      survival_truncation: num(share(plain.truncation?.[AT])),
      survival_ratio_vs_truncation: num(ratio(best, share(plain.truncation?.[AT])), 2),
      survival_recall_with_prompt: num(recallPrompted),
      survival_recall_vs_ceiling: num(ratio(recallPrompted, share(ceilingSampled)), 3),
      evidence_recall_with_prompt: recallOk ? num(evidenceShare(prompted.recall?.[AT])) : null,
      survival_at_budget: AT,
      survival_whole_conversation: num(share(ceiling)),
      survival_whole_conversation_sampled: num(share(ceilingSampled)),
      by_budget: Object.fromEntries([...SERVED, "truncation"].map((m) => [m, ok(m as Method) ? byBudget(m as Method) : null])),
      missing: reasons,
      conversations: convs.length,
      questions,
      questions_with_prompt: sampledCount,
      budgets,
    },
    goals,
    headline: [
      "survival_ratio_vs_truncation",
      "survival_recall_with_prompt",
      "survival_recall_vs_ceiling",
      "evidence_recall_with_prompt",
      "survival_whole_conversation",
    ],
    notes: [
      `${convs.length} LoCoMo conversations${ctx.quick ? " (--quick: the first 2, budget 8k only)" : ""}, ${questions} questions (category 5 left out); survival_* keys are at ${AT} tokens`,
      `without a prompt: the last Assemble of the replay (prompt ""), scored against every question; survival_ratio_vs_truncation is the best engine against truncation`,
      `with the question as the prompt: ${sampledCount} questions (every k-th, at most ${perConversation} per conversation), one Assemble each whose prompt is the question alone; survival_recall_vs_ceiling divides recall's share by the whole conversation's share over the same questions`,
      "answer survival: the normalized answer (lowercase, punctuation and articles removed, whitespace collapsed) occurs as whole words in the assembled context (system prompt addition included); evidence: every evidence turn occurs in it",
      ...Object.entries(reasons).map(([m, why]) => `${m}: ${why}`),
      "LoCoMo (CC BY-NC 4.0) is read at run time from the file BENCH_LOCOMO names; nothing of it is stored in the repository or in the report",
    ],
    tables: [
      {
        title: "compaction_quality: LoCoMo, the assembled context after incremental compaction",
        headers: ["budget", "method", "answers % (no prompt)", "evidence %", "avg tokens", "answers % (question as prompt)", "evidence %", "avg tokens"],
        rows,
      },
    ],
  };
}

export const compactionQuality: Scenario = {
  name: "compaction_quality",
  title:
    "LoCoMo answers still in the assembled context after incremental compaction at 4k/8k/16k, without a prompt and with the question as the prompt: every engine vs truncation",
  run,
};
