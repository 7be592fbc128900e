/**
 * The lossless engine's settings: in code (`resolveLosslessOptions({...})`) or from the
 * environment (`losslessOptionsFromEnv(process.env)`), validated once at start so a typo fails
 * loudly with the variable's name instead of silently running with a default.
 */

export interface LosslessOptions {
  /** SQLite file holding messages and summaries. Env `LOSSLESS_DB`; default `./data/lossless.db`. */
  dbPath: string;
  /**
   * Newest raw tokens compaction leaves alone (the protected fresh tail). Env
   * `LOSSLESS_FRESH_TAIL_TOKENS`; default 8000. When the tail alone is over the compaction target,
   * compaction shrinks the protection step by step (down to the latest user turn) instead of giving up.
   */
  freshTailTokens: number;
  /** Target size of the message run one leaf summary covers. Env `LOSSLESS_CHUNK_TOKENS`; default 6000. */
  chunkTokens: number;
  /** How many summaries of one depth are condensed into one of the next depth. Env `LOSSLESS_FANOUT`; default 4. */
  fanout: number;
  /**
   * Tokens left for the model's answer when compacting to a budget: compaction aims at
   * `token_budget − reserveTokens`, but never below min(8000, token_budget / 2). contextd's default: 16384.
   */
  reserveTokens: number;
  /** Hard cap on a leaf summary's text, in characters (default 3000, roughly 800 tokens). */
  leafSummaryChars: number;
  /** Hard cap on a condensed summary's text, in characters (default 4000). */
  condensedSummaryChars: number;
  /** Use the host's summarizer model (HostService.Complete) when it has one. Default true. */
  useHostModel: boolean;
}

export const DEFAULT_LOSSLESS_OPTIONS: Readonly<LosslessOptions> = Object.freeze({
  dbPath: "./data/lossless.db",
  freshTailTokens: 8000,
  chunkTokens: 6000,
  fanout: 4,
  reserveTokens: 16384,
  leafSummaryChars: 3000,
  condensedSummaryChars: 4000,
  useHostModel: true,
});

/** The environment variables the engine reads (besides the SDK's CONTEXTD_*). */
export const LOSSLESS_ENV = {
  dbPath: "LOSSLESS_DB",
  freshTailTokens: "LOSSLESS_FRESH_TAIL_TOKENS",
  chunkTokens: "LOSSLESS_CHUNK_TOKENS",
  fanout: "LOSSLESS_FANOUT",
} as const;

function fail(problem: string): never {
  throw new Error(`lossless: ${problem}`);
}

function integer(name: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    fail(`${name} must be an integer >= ${min} (got ${JSON.stringify(value)})`);
  }
  return value;
}

/** Defaults filled in and every value checked; throws an Error naming the bad option. */
export function resolveLosslessOptions(partial: Partial<LosslessOptions> = {}): LosslessOptions {
  const o = { ...DEFAULT_LOSSLESS_OPTIONS, ...stripUndefined(partial) };
  if (typeof o.dbPath !== "string" || !o.dbPath.trim()) fail("dbPath must be a non-empty path");
  return {
    dbPath: o.dbPath,
    freshTailTokens: integer("freshTailTokens", o.freshTailTokens, 0),
    chunkTokens: integer("chunkTokens", o.chunkTokens, 1),
    fanout: integer("fanout", o.fanout, 2),
    reserveTokens: integer("reserveTokens", o.reserveTokens, 0),
    leafSummaryChars: integer("leafSummaryChars", o.leafSummaryChars, 200),
    condensedSummaryChars: integer("condensedSummaryChars", o.condensedSummaryChars, 200),
    useHostModel: Boolean(o.useHostModel),
  };
}

/** The options set in the environment (unset variables are left out, so defaults apply). */
export function losslessOptionsFromEnv(env: Record<string, string | undefined> = process.env): Partial<LosslessOptions> {
  const out: Partial<LosslessOptions> = {};
  const db = env[LOSSLESS_ENV.dbPath]?.trim();
  if (db) out.dbPath = db;
  for (const key of ["freshTailTokens", "chunkTokens", "fanout"] as const) {
    const name = LOSSLESS_ENV[key];
    const raw = env[name]?.trim();
    if (!raw) continue;
    if (!/^\d+$/.test(raw)) fail(`${name} must be a whole number (got "${raw}")`);
    out[key] = Number(raw);
  }
  return out;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * What the context may occupy once room for the answer is set aside: contextd's own rule
 * (docs/concepts.md, "Budgets"), `budget − reserve` but at least min(8000, budget / 2) — shared, so
 * both engines aim at the same target.
 */
export { MIN_PROMPT_BUDGET_TOKENS, promptBudget } from "../../src/sdk/engine-sdk.js";
