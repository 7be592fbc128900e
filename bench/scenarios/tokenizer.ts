/**
 * tokenizer: the configured tokenizer (o200k_base through src/tokens/create-tokenizer.ts, the code
 * contextd runs) in this process.
 *
 * - tokens_per_s: countMessage over realistic coding-agent messages never counted before, measured
 *   after 7M tokens of new text have gone through the tokenizer — the state of a contextd that has
 *   been appending for a while (contextd remembers the counts of BPE pieces, src/tokens/piece-counts.ts,
 *   and how fast counting is depends on that cache). Interleaved with it: the LoCoMo dialogue turns
 *   (real English chat, each counted once) when the data is there, and gpt-tokenizer counting each
 *   text whole with no cache at all (what contextd did before the piece cache:
 *   `tokens_per_s_without_piece_cache`). Also reported: the first batches of a fresh process.
 * - adversarial_tokens_per_s: the worst of countText over texts that are one long BPE piece each —
 *   1 MB (100 kB with --quick) of one letter, of spaces, of punctuation, of brackets, of digits, of
 *   one CJK character, of emoji with joiners, of an alternating pair — where a merge that rescans the
 *   whole piece at every step is quadratic. `adversarial_ratio` = that / tokens_per_s (goal ≥ 0.5).
 * - cached_assemble_speedup: what storing counts at append saves. A 27k-token view (60 messages) is
 *   stored in the real SQLite store (src/store/sqlite); "stored counts" = readActiveView, which sums
 *   the counts stored with the entries (what Assemble does); "re-tokenize" = the same read plus
 *   countMessage on every message of the view. Interleaved batches; speedup = median re-tokenize
 *   time / median stored-counts time.
 */
import fs from "node:fs";
import path from "node:path";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { openStore } from "../../src/store/open-store.js";
import { createTokenizer, DEFAULT_IMAGE_TOKENS } from "../../src/tokens/create-tokenizer.js";
import * as o200k from "gpt-tokenizer/encoding/o200k_base";
import { messageParts } from "../../src/tokens/message-parts.js";
import { interleave } from "../harness/interleave.js";
import { loadLocomo, locomoPath } from "../harness/locomo.js";
import { codingMessages } from "../harness/messages.js";
import { makeTempDir, removeTempDir } from "../harness/processes.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { median, nowMs, ratio, round } from "../harness/stats.js";

/** Tokens counted before the "long-running" measurements (gpt-tokenizer slows down after ~5M). */
const FILL_TOKENS = 7_000_000;
const FRESH_BATCHES = 4;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const tokenizer = createTokenizer("o200k_base");
  const rounds = ctx.quick ? 3 : 12;
  const perBatch = 300;
  const totalSteps = FRESH_BATCHES + FILL_TOKENS / 1e6 + 3 * (rounds + 1) + 2 * (rounds + 1) + 8;
  let steps = 0;
  const step = (phase: string) => ctx.progress.update(++steps, totalSteps, phase);

  let seed = 90_000;
  const count = (messages: Message[]) => {
    const s = nowMs();
    let tokens = 0;
    for (const m of messages) tokens += tokenizer.countMessage(m);
    return { tokens, ms: nowMs() - s };
  };
  const rate = (messages: Message[]) => {
    const c = count(messages);
    return (c.tokens * 1000) / c.ms;
  };
  const coding = () => rate(codingMessages({ count: perBatch, seed: seed++ }));
  // The same messages' parts counted by gpt-tokenizer whole, its own merge cache off: no cache at all.
  o200k.setMergeCacheSize(0);
  const noSpecial = { disallowedSpecial: new Set<string>() };
  const wholeText = () => {
    const messages = codingMessages({ count: perBatch, seed: seed++ });
    const s = nowMs();
    let tokens = 0;
    for (const m of messages) {
      const p = messageParts(m, DEFAULT_IMAGE_TOKENS);
      tokens += p.texts.reduce((n, t) => n + (t ? o200k.countTokens(t, noSpecial) : 0), p.fixed);
    }
    return (tokens * 1000) / (nowMs() - s);
  };

  // 1. A fresh process: the first coding messages it counts.
  const fresh: number[] = [];
  for (let i = 0; i < FRESH_BATCHES; i++, step("tokens/s, fresh")) fresh.push(coding());

  // 2. A long-running process: keep counting new text until FILL_TOKENS have gone through the tokenizer
  //    (gpt-tokenizer's merge cache is full long before that), then measure.
  let filled = 0;
  let nextStep = 1e6;
  while (filled < FILL_TOKENS) {
    filled += count(codingMessages({ count: perBatch, seed: seed++ })).tokens;
    for (; filled >= nextStep && nextStep <= FILL_TOKENS; nextStep += 1e6) step(`counting ${FILL_TOKENS / 1e6}M tokens to reach a long-running state`);
  }
  const locomo = fs.existsSync(locomoPath()) ? loadLocomo().flatMap((c) => c.sessions.flat()) : [];
  // Every LoCoMo turn is counted once: the turns are split into one disjoint slice per batch.
  const locomoSlice = Math.floor(locomo.length / (rounds + 1));
  let locomoAt = 0;
  const variants = [
    { name: "coding", batch: async () => coding() },
    { name: "whole_text", batch: async () => wholeText() },
    ...(locomo.length
      ? [
          {
            name: "locomo",
            batch: async () => {
              const slice = locomo.slice(locomoAt, locomoAt + locomoSlice);
              locomoAt += locomoSlice;
              return rate(slice);
            },
          },
        ]
      : []),
  ];
  const rates = await interleave(variants, { rounds, onBatch: () => step("tokens/s, long-running") });

  // --- adversarial shapes: one long piece each ----------------------------------------------------
  const adversarialBytes = ctx.quick ? 100_000 : 1_000_000;
  const shapes: [string, string][] = [
    ["one letter", "a"],
    ["spaces", " "],
    ["punctuation", "!"],
    ["brackets", "[{"],
    ["digits", "7"],
    ["one CJK character", "日"],
    ["emoji with joiners", "👨‍👩‍👧"],
    ["alternating pair", "ab"],
  ];
  const adversarial = shapes.map(([shape, unit]) => {
    const text = unit.repeat(Math.ceil(adversarialBytes / Buffer.byteLength(unit)));
    const s = nowMs();
    const tokens = tokenizer.countText(text);
    const ms = nowMs() - s;
    step(`adversarial: ${shape}`);
    return { shape, tokens, ms, rate: (tokens * 1000) / Math.max(ms, 0.001) };
  });
  const worst = adversarial.reduce((a, b) => (b.rate < a.rate ? b : a));

  // --- stored counts vs re-tokenizing on Assemble's read path -----------------------------------
  const dir = makeTempDir("tokenizer");
  const store = await openStore(`sqlite:${path.join(dir, "t.db")}`);
  try {
    const view = codingMessages({ count: 60, seed: 4242 });
    await store.appendMessages(
      "view",
      view.map((message) => ({ message, tokenCount: tokenizer.countMessage(message) })),
      { sessionKey: "", agentId: "bench" },
    );
    const probe = (await store.readActiveView("view"))!;
    const calls = ctx.quick ? 10 : 20;
    const timed = (retokenize: boolean) => async () => {
      const out: number[] = [];
      for (let i = 0; i < calls; i++) {
        const s = nowMs();
        const v = (await store.readActiveView("view"))!;
        let tokens = v.tokens;
        if (retokenize) {
          tokens = 0;
          for (const m of v.messages) tokens += tokenizer.countMessage(m.message);
        }
        if (tokens <= 0) throw new Error("empty view");
        out.push(nowMs() - s);
      }
      return out;
    };
    const views = await interleave(
      [
        { name: "stored", batch: timed(false) },
        { name: "retokenize", batch: timed(true) },
      ],
      { rounds, onBatch: () => ctx.progress.update(++steps, totalSteps, "stored counts vs re-tokenizing") },
    );
    const stored = median(views.stored.flat());
    const retok = median(views.retokenize.flat());

    const codingRate = median(rates.coding);
    const real = rates.locomo ? median(rates.locomo) : Number.NaN;
    return {
      metrics: {
        tokens_per_s: round(codingRate, 0),
        tokens_per_s_fresh_process: round(median(fresh), 0),
        tokens_per_s_range: { min: round(Math.min(...rates.coding), 0), max: round(Math.max(...rates.coding), 0) },
        tokens_per_s_without_piece_cache: round(median(rates.whole_text), 0),
        piece_cache_speedup: round(ratio(codingRate, median(rates.whole_text)), 2),
        tokens_per_s_locomo: rates.locomo ? round(real, 0) : null,
        adversarial_tokens_per_s: round(worst.rate, 0),
        adversarial_worst_shape: worst.shape,
        adversarial_ratio: round(ratio(worst.rate, codingRate), 2),
        adversarial_bytes: adversarialBytes,
        cached_assemble_speedup: round(ratio(retok, stored), 1),
        view: { messages: probe.messages.length, tokens: probe.tokens },
        view_read_ms_stored_counts: round(stored, 3),
        view_read_ms_retokenized: round(retok, 3),
        tokenizer: "o200k_base",
      },
      headline: [
        "tokens_per_s",
        "tokens_per_s_fresh_process",
        "tokens_per_s_without_piece_cache",
        "piece_cache_speedup",
        "tokens_per_s_locomo",
        "adversarial_tokens_per_s",
        "adversarial_ratio",
        "cached_assemble_speedup",
        "view_read_ms_stored_counts",
        "view_read_ms_retokenized",
      ],
      notes: [
        `tokens/s: after ${FILL_TOKENS / 1e6}M tokens of new text had been counted (as in a contextd that has run for a while), ${rounds} measured batches of ${perBatch} never-seen coding messages${locomo.length ? ` and of ${locomoSlice} LoCoMo turns (each turn counted once)` : ""}, interleaved; medians. Fresh process: the first ${FRESH_BATCHES} batches this scenario counts. Without piece cache: gpt-tokenizer counting each text whole, its merge cache off, interleaved (never-seen messages too)`,
        `view: ${probe.messages.length} messages, ${probe.tokens} tokens; ${rounds} measured rounds × ${calls} reads per variant`,
      ],
      tables: [
        {
          title: "tokenizer: o200k_base in process",
          headers: ["measure", "value"],
          rows: [
            [`tokens/s, coding messages, after ${FILL_TOKENS / 1e6}M tokens (long-running)`, round(codingRate, 0)],
            ["tokens/s, coding messages, fresh process", round(median(fresh), 0)],
            ["tokens/s, coding messages, no piece cache (gpt-tokenizer, whole texts)", round(median(rates.whole_text), 0)],
            ["tokens/s, LoCoMo dialogue", rates.locomo ? round(real, 0) : "n/a"],
            [`view read, stored counts (${probe.tokens} tokens) ms`, round(stored, 3)],
            ["view read + re-tokenize ms", round(retok, 3)],
            ["speedup of stored counts", round(ratio(retok, stored), 1)],
          ],
        },
        {
          title: `tokenizer: texts that are one BPE piece of ${adversarialBytes.toLocaleString("en-US")} bytes`,
          headers: ["shape", "tokens", "ms", "tokens/s"],
          rows: adversarial.map((a) => [a.shape, a.tokens, round(a.ms, 1), round(a.rate, 0)]),
        },
      ],
    };
  } finally {
    await store.close();
    removeTempDir(dir);
  }
}

export const tokenizer: Scenario = {
  name: "tokenizer",
  title: "Tokens/s of o200k_base on realistic messages; Assemble's read path with stored counts vs re-tokenizing",
  run,
};
