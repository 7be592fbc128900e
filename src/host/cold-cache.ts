import type { PromptCache } from "../contract/gen/contextd/v1/types.js";

/**
 * Whether the runtime's prompt-cache telemetry (AssembleRequest.prompt_cache) says the provider's
 * cache holds nothing of this session's prompt: the cached prefix has expired, or the last model
 * call read nothing from the cache and wrote nothing to it. A compaction rewrites the prompt from
 * the first message it summarizes on, which on a warm cache costs a cache write of everything after
 * it; on a cold one the next call writes the whole prompt anyway. No telemetry, or figures that say
 * nothing (no input counted, no expiry known), is not cold.
 */
export function cacheIsCold(pc: PromptCache | undefined, nowMs: number): boolean {
  if (!pc) return false;
  if (pc.expiresAtMs > 0 && pc.expiresAtMs <= nowMs) return true;
  return pc.lastCallInputTokens > 0 && pc.lastCallCacheReadTokens === 0 && pc.lastCallCacheWriteTokens === 0;
}

/**
 * Whether auto-compaction should compact a view that still fits: the cache is cold and the view is
 * at `ratio` of the budget or more (ratio 0: never).
 */
export function compactWhileCold(pc: PromptCache | undefined, viewTokens: number, budget: number, ratio: number, nowMs: number): boolean {
  return ratio > 0 && viewTokens <= budget && viewTokens >= ratio * budget && cacheIsCold(pc, nowMs);
}
