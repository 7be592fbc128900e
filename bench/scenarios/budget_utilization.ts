/**
 * budget_utilization: does the context use the budget right after a BUDGET compaction? (Goal, in
 * docs/performance.md: ≥ 80 % of the prompt budget when the history holds that much.)
 *
 * The case: a runtime appends a ~150k-token coding session made of a few user turns (4), each
 * followed by dozens of large tool call/result pairs (codingMessages' sizes, ~100–1500 tokens a
 * result), ending with the user request the agent is about to answer; then it calls
 * SessionService.Assemble at a 32k budget. The view is far over the budget, so the host compacts it
 * natively (target BUDGET) before the engine assembles — `legacy`, and every engine that delegates
 * compaction to the host: `window` (Python, a managed sidecar of contextd as config/contextd.yaml
 * runs it) and `newest-first` (dist/engines/newest-first, started as a sidecar). One contextd serves
 * all three, `slots.agents` routing one agent to each.
 *
 * Per Assemble: utilization = estimated_tokens ÷ prompt budget (promptBudget(32k, reserve 16 384) =
 * 15 616), checked: the answer reports the compaction, is within the budget, holds whole tool pairs
 * and the latest user message (verbatim, or quoted in the summary). `budget_utilization_p50` is the
 * lowest of the engines' medians over the seeds (so one engine that under-uses the budget shows).
 *
 * Before the fix (legacy, 3 seeds): 0.28 — the summary (~4.5k tokens) plus the pending request.
 */
import path from "node:path";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage, messageText, summaryOf, toolCallIds } from "../../src/contract/messages.js";
import { promptBudget } from "../../src/contract/prompt-budget.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import type { Tokenizer } from "../../src/tokens/tokenizer.js";
import { sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { waitForEngine } from "../harness/engines.js";
import { codingMessages } from "../harness/messages.js";
import { REPO_ROOT, spawnNode, type Child } from "../harness/processes.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { median, round } from "../harness/stats.js";

const BUDGET = 32_000;
const RESERVE = 16_384;
const SESSION_TOKENS = 150_000;
const USER_TURNS = 4;
const APPEND_BATCH = 100;
const PYTHON = "/usr/bin/python3";
const NEWEST_FIRST_MAIN = path.join(REPO_ROOT, "dist/engines/newest-first/main.js");

const ENGINES = [
  { engine: "legacy", agent: "budget-legacy" },
  { engine: "window", agent: "budget-window" },
  { engine: "newest-first", agent: "budget-newest-first" },
] as const;

// ---- the session --------------------------------------------------------------------------------

/**
 * The session: `userTurns` user requests, each followed by dozens of tool pairs (assistant
 * call + its result) and a wrap-up, then one more (pending) request. Built from codingMessages, so
 * text and sizes are the bench's usual ones; its pairs are regrouped under few user requests, which
 * is what makes the last turn boundary a poor cut (every finished turn is larger than the budget,
 * and after the last one comes only a short request). Deterministic for a seed.
 */
export interface ToolHeavyOptions {
  /** Total tokens of the session (as `tokenizer` counts them) to reach, at least. */
  targetTokens: number;
  /** Answered user turns; the session then ends with one more (pending) user request. */
  userTurns: number;
  seed: number;
  tokenizer: Tokenizer;
}

export interface ToolHeavySession {
  messages: Message[];
  /** Tokens of every message, as `tokenizer` counts them. */
  tokens: number;
  toolPairs: number;
}

interface Pieces {
  users: Message[];
  pairs: Message[][];
  wrapUps: Message[];
}

/** The user requests, tool pairs (assistant call + its result) and wrap-ups of a codingMessages run. */
function pieces(count: number, seed: number): Pieces {
  const msgs = codingMessages({ count, seed });
  const out: Pieces = { users: [], pairs: [], wrapUps: [] };
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i];
    if (m.role === Role.ROLE_USER) out.users.push(m);
    else if (m.role === Role.ROLE_ASSISTANT && toolCallIds(m).length > 0) {
      if (msgs[i + 1]?.role === Role.ROLE_TOOL_RESULT) out.pairs.push([m, msgs[++i]]);
    } else if (m.role === Role.ROLE_ASSISTANT) out.wrapUps.push(m);
  }
  return out;
}

export function toolHeavySession(opts: ToolHeavyOptions): ToolHeavySession {
  const { tokenizer, userTurns } = opts;
  // Enough raw material: codingMessages averages ~600 tokens a message in "normal" size.
  let count = Math.ceil(opts.targetTokens / 250) + 200;
  for (;;) {
    const p = pieces(count, opts.seed);
    const pairTokens = p.pairs.map((pair) => pair.reduce((s, m) => s + tokenizer.countMessage(m), 0));
    const available = pairTokens.reduce((a, b) => a + b, 0);
    if (available < opts.targetTokens || p.users.length < userTurns + 1 || p.wrapUps.length < userTurns) {
      count *= 2;
      continue;
    }
    // Spread the pairs evenly over the turns until the target is reached.
    let needed = 0;
    let acc = 0;
    while (acc < opts.targetTokens) acc += pairTokens[needed++];
    const perTurn = Math.ceil(needed / userTurns);
    const messages: Message[] = [];
    let next = 0;
    for (let t = 0; t < userTurns; t++) {
      messages.push(p.users[t]);
      for (let k = 0; k < perTurn && next < needed; k++) messages.push(...p.pairs[next++]);
      messages.push(p.wrapUps[t]);
    }
    messages.push(p.users[userTurns]);
    const tokens = messages.reduce((s, m) => s + tokenizer.countMessage(m), 0);
    return { messages, tokens, toolPairs: needed };
  }
}

// ---- the measurement ----------------------------------------------------------------------------

interface Sample {
  engine: string;
  seed: number;
  sessionTokens: number;
  toolPairs: number;
  utilization: number;
  estimatedTokens: number;
  summaryTokens: number;
  keptMessages: number;
  keptToolPairs: number;
  cut: string;
}

/** Throws unless `messages` hold whole tool pairs and the latest request (verbatim or quoted). */
function check(engine: string, messages: Message[], latest: Message): void {
  const calls = new Set(messages.flatMap(toolCallIds));
  const results = messages.filter((m) => m.role === Role.ROLE_TOOL_RESULT).map((m) => m.toolCallId);
  for (const id of results) if (!calls.has(id)) throw new Error(`${engine}: tool result ${id} without its call`);
  for (const id of calls) if (!results.includes(id)) throw new Error(`${engine}: tool call ${id} without its result`);
  const text = messageText(latest);
  const present = messages.some((m) => (m.role === Role.ROLE_USER && messageText(m) === text) || (isSummaryMessage(m) && summaryOf(m).includes(text)));
  if (!present) throw new Error(`${engine}: the latest user message is not in the assembled context`);
}

function startNewestFirst(registry: string): Child {
  return spawnNode({
    args: [NEWEST_FIRST_MAIN],
    env: { CONTEXTD_REGISTRY: registry, CONTEXTD_OWNER: "bench", CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0", ENGINE_ID: "newest-first", CONTEXTD_LOG_LEVEL: "warn" },
  });
}

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const seeds = ctx.quick ? [1] : [1, 2, 3, 4, 5];
  const total = seeds.length * ENGINES.length + 1;
  let step = 0;
  ctx.progress.update(step, total, "starting contextd, window (managed) and newest-first");
  const tokenizer = createTokenizer("o200k_base");
  const cd = await startContextd({
    config: {
      slots: { agents: Object.fromEntries(ENGINES.filter((e) => e.engine !== "legacy").map((e) => [e.agent, e.engine])) },
      engines: { managed: [{ id: "window", command: [PYTHON, "engines/window/main.py"], cwd: REPO_ROOT, owner: "bench" }] },
      compaction: { reserve_tokens: RESERVE },
    },
  });
  const newestFirst = startNewestFirst(cd.address);
  const client = sessionClient(cd.address);
  const samples: Sample[] = [];
  try {
    await Promise.all([waitForEngine(cd.address, "window", 60_000), waitForEngine(cd.address, "newest-first", 60_000)]);
    const budget = promptBudget(BUDGET, RESERVE);
    for (const seed of seeds) {
      const built = toolHeavySession({ targetTokens: SESSION_TOKENS, userTurns: USER_TURNS, seed, tokenizer });
      const latest = built.messages[built.messages.length - 1];
      for (const { engine, agent } of ENGINES) {
        ctx.progress.update(step++, total, `${engine}, seed ${seed}: append ${Math.round(built.tokens / 1000)}k tokens, Assemble at ${BUDGET / 1000}k`);
        const session = { sessionId: `budget-${engine}-${seed}`, agentId: agent };
        for (let i = 0; i < built.messages.length; i += APPEND_BATCH)
          await client.appendMessages({ session, messages: built.messages.slice(i, i + APPEND_BATCH) });
        const answer = await client.assemble({ session, tokenBudget: BUDGET });
        if (answer.engineId !== engine) throw new Error(`${engine}: answered by ${answer.engineId} (${answer.fallbackReason})`);
        if (!answer.compaction) throw new Error(`${engine}: Assemble did not compact (the view was expected to be over the budget)`);
        if (answer.estimatedTokens > BUDGET) throw new Error(`${engine}: ${answer.estimatedTokens} tokens, over the budget ${BUDGET}`);
        check(engine, answer.messages, latest);
        const summary = answer.messages.find(isSummaryMessage);
        const kept = answer.messages.filter((m) => !isSummaryMessage(m) && m.role !== Role.ROLE_SYSTEM);
        samples.push({
          engine,
          seed,
          sessionTokens: built.tokens,
          toolPairs: built.toolPairs,
          utilization: answer.estimatedTokens / budget,
          estimatedTokens: answer.estimatedTokens,
          summaryTokens: summary ? tokenizer.countMessage(summary) : 0,
          keptMessages: kept.length,
          keptToolPairs: kept.filter((m) => m.role === Role.ROLE_TOOL_RESULT).length,
          cut: String(answer.compaction.details?.cut ?? ""),
        });
      }
    }
    ctx.progress.update(total, total, "done");
    const byEngine = Object.fromEntries(ENGINES.map(({ engine }) => [engine, samples.filter((s) => s.engine === engine)]));
    const p50 = Object.fromEntries(Object.entries(byEngine).map(([engine, s]) => [engine, median(s.map((x) => x.utilization))]));
    const worst = Math.min(...Object.values(p50));
    return {
      metrics: {
        budget_utilization_p50: round(worst, 3),
        budget_utilization_p50_by_engine: Object.fromEntries(Object.entries(p50).map(([e, v]) => [e, round(v, 3)])),
        budget_utilization_min: round(Math.min(...samples.map((s) => s.utilization)), 3),
        prompt_budget_tokens: budget,
        token_budget: BUDGET,
        session_tokens: round(median(samples.map((s) => s.sessionTokens)), 0),
        seeds,
      },
      goals: [{ key: "budget_utilization_p50", op: ">=", target: 0.8 }],
      headline: ["budget_utilization_p50_by_engine"],
      notes: [
        `a ~${SESSION_TOKENS / 1000}k-token session of ${USER_TURNS} user turns, each with dozens of tool pairs (codingMessages sizes), ending with a pending request; appended in batches of ${APPEND_BATCH}, then Assemble at ${BUDGET} (reserve_tokens ${RESERVE} → prompt budget ${budget}); the host compacts natively (BUDGET) before each engine assembles`,
        "budget_utilization_p50 = the lowest of the engines' medians of estimated_tokens ÷ prompt budget; every answer is checked: compaction reported, within the budget, whole tool pairs, the latest user message present",
        `seeds: ${seeds.join(", ")}${ctx.quick ? " (--quick: one seed)" : ""}; window is a managed sidecar (${PYTHON} engines/window/main.py), newest-first runs from dist/engines/newest-first/main.js`,
      ],
      tables: [
        {
          title: `budget_utilization: tokens assembled right after a BUDGET compaction (budget ${BUDGET}, prompt budget ${budget})`,
          headers: [
            "engine",
            "seed",
            "session tokens",
            "tool pairs",
            "assembled tokens",
            "summary tokens",
            "kept messages",
            "kept tool pairs",
            "cut",
            "utilization",
          ],
          rows: samples.map((s) => [
            s.engine,
            s.seed,
            s.sessionTokens,
            s.toolPairs,
            s.estimatedTokens,
            s.summaryTokens,
            s.keptMessages,
            s.keptToolPairs,
            s.cut,
            round(s.utilization, 3),
          ]),
        },
      ],
    };
  } finally {
    client.close();
    await newestFirst.stop(5_000);
    await cd.stop();
  }
}

export const budgetUtilization: Scenario = {
  name: "budget_utilization",
  title: "Share of the prompt budget used right after a BUDGET compaction: a 150k-token tool-heavy session at 32k (legacy, window, newest-first)",
  run,
};
