/** When the runtime's prompt-cache telemetry makes auto-compaction compact a view that still fits. */
import { describe, expect, it } from "vitest";
import { PromptCacheRetention, type PromptCache } from "../../../src/contract/gen/contextd/v1/types.js";
import { cacheIsCold, compactWhileCold } from "../../../src/host/cold-cache.js";

const NOW = 1_796_000_000_000;
const pc = (over: Partial<PromptCache> = {}): PromptCache => ({
  retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
  lastCallInputTokens: 1_000,
  lastCallCacheReadTokens: 800,
  lastCallCacheWriteTokens: 0,
  lastCallOutputTokens: 10,
  broke: false,
  lastTouchMs: 0,
  expiresAtMs: 0,
  ...over,
});

describe("cacheIsCold", () => {
  it("is cold when the prefix expired or the last call neither read nor wrote the cache; not without telemetry or figures", () => {
    expect(cacheIsCold(pc({ expiresAtMs: NOW }), NOW)).toBe(true);
    expect(cacheIsCold(pc({ lastCallCacheReadTokens: 0 }), NOW)).toBe(true);
    expect(cacheIsCold(pc({ lastCallCacheReadTokens: 0, lastCallCacheWriteTokens: 500 }), NOW)).toBe(false);
    expect(cacheIsCold(pc({ expiresAtMs: NOW + 1 }), NOW)).toBe(false);
    expect(cacheIsCold(pc({ lastCallInputTokens: 0, lastCallCacheReadTokens: 0 }), NOW)).toBe(false);
    expect(cacheIsCold(undefined, NOW)).toBe(false);
  });
});

describe("compactWhileCold", () => {
  const cold = pc({ expiresAtMs: NOW - 1 });
  it("only for a cold cache, a view from the ratio up to the budget, and a ratio above 0", () => {
    expect(compactWhileCold(cold, 900, 1_000, 0.9, NOW)).toBe(true);
    expect(compactWhileCold(cold, 899, 1_000, 0.9, NOW)).toBe(false);
    // Over the budget, auto-compaction compacts anyway.
    expect(compactWhileCold(cold, 1_001, 1_000, 0.9, NOW)).toBe(false);
    expect(compactWhileCold(cold, 950, 1_000, 0, NOW)).toBe(false);
    expect(compactWhileCold(pc(), 950, 1_000, 0.9, NOW)).toBe(false);
  });
});
