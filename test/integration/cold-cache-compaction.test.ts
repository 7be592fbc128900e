/**
 * Cache-aware auto-compaction (`compaction.cold_cache_compact_ratio`) through a real contextd: an
 * Assemble whose prompt-cache telemetry says the provider's cache is cold compacts a view that still
 * fits but is near the budget — the rewrite costs no cache then — while a warm cache, no telemetry,
 * or a view well under the budget leaves the view as it is, to be compacted only when it no longer fits.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PromptCacheRetention, type PromptCache } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const RATIO = 0.8;

function history() {
  const messages = [];
  for (let i = 1; i <= 40; i++) {
    messages.push(user(`Step ${i}: reconcile ledger batch ${1000 + i} against the invoice export for region ${i % 7}.`));
    messages.push(assistant(`Batch ${1000 + i}: entry L-${i * 17} differs (expected 1${i}.00 EUR, found 1${i}.50 EUR).`));
  }
  return messages;
}

const telemetry = (over: Partial<PromptCache>): PromptCache => ({
  retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_SHORT,
  lastCallInputTokens: 3_000,
  lastCallCacheReadTokens: 2_800,
  lastCallCacheWriteTokens: 100,
  lastCallOutputTokens: 50,
  broke: false,
  lastTouchMs: Date.now() - 1_000,
  expiresAtMs: Date.now() + 240_000,
  ...over,
});

describe("cache-aware auto-compaction", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let n = 0;
  /** The view's tokens as the host counts them (an Assemble that never compacts). */
  let viewTokens = 0;

  beforeAll(async () => {
    contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 200, reserve_tokens: 0, cold_cache_compact_ratio: RATIO } } });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    const probe = await session();
    viewTokens = (await cx.assemble({ session: probe, tokenBudget: 1_000_000, autoCompact: false })).estimatedTokens;
    expect(viewTokens).toBeGreaterThan(1_000);
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  async function session() {
    const s = { sessionId: `cold-${++n}` };
    await cx.appendMessages({ session: s, messages: history() });
    return s;
  }
  /** A budget the view fills to 90 %: it fits, and is over the ratio. */
  const near = () => Math.ceil(viewTokens / 0.9);

  it("compacts a view at 90 % of the budget when the cache expired, or when the last call neither read nor wrote it", async () => {
    for (const promptCache of [
      telemetry({ expiresAtMs: Date.now() - 1_000 }),
      telemetry({ lastCallCacheReadTokens: 0, lastCallCacheWriteTokens: 0, expiresAtMs: 0 }),
    ]) {
      const res = await cx.assemble({ session: await session(), tokenBudget: near(), promptCache });
      expect(res.compaction, JSON.stringify(promptCache)).toBeDefined();
      expect(res.compaction!.tokensBefore).toBe(viewTokens);
      expect(res.estimatedTokens).toBeLessThan(viewTokens);
      expect(res.messages.some((m) => m.metadata["contextd.kind"] === "compaction_summary")).toBe(true);
    }
  });

  it("leaves the view as it is on a warm cache, without telemetry, and under the ratio; a view over the budget is compacted whatever the cache", async () => {
    const warm = await cx.assemble({ session: await session(), tokenBudget: near(), promptCache: telemetry({}) });
    const silent = await cx.assemble({ session: await session(), tokenBudget: near() });
    const roomy = await cx.assemble({ session: await session(), tokenBudget: viewTokens * 2, promptCache: telemetry({ expiresAtMs: Date.now() - 1_000 }) });
    for (const res of [warm, silent, roomy]) {
      expect(res.compaction).toBeUndefined();
      expect(res.estimatedTokens).toBe(viewTokens);
    }
    const over = await cx.assemble({ session: await session(), tokenBudget: Math.floor(viewTokens * 0.9), promptCache: telemetry({}) });
    expect(over.compaction).toBeDefined();
  });
});
