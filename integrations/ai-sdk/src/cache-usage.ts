import type { LanguageModelV3Usage } from "@ai-sdk/provider";
import { PromptCacheRetention, type PromptCache } from "contextd/client";

const UINT32_MAX = 0xffff_ffff;
/** A read under half the previous call's, after a read of at least this many tokens, is a broken cache. */
const BROKE_MIN_READ = 1024;

const tokens = (v: number | undefined): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.min(Math.floor(v), UINT32_MAX) : 0);

/**
 * contextd's prompt-cache telemetry (PromptCache) from the usage a provider reported for a model
 * call, or undefined when the provider said nothing of its cache (neither cache reads nor writes).
 * The AI SDK reports cache reads for OpenAI-style usage (`prompt_tokens_details.cached_tokens`),
 * Anthropic, Bedrock and Gemini, and cache writes where the provider has them (Anthropic, Bedrock).
 *
 * `broke`: the call read less than half of what the previous call of the session read (after a
 * read of at least 1,024 tokens, the smallest prefix providers cache). Retention and expiry are
 * not in the SDK's usage: left unspecified (0).
 */
export function promptCacheOf(usage: LanguageModelV3Usage | undefined, previous: PromptCache | undefined, now: number): PromptCache | undefined {
  const input = usage?.inputTokens;
  if (!input || (input.cacheRead === undefined && input.cacheWrite === undefined)) return undefined;
  const read = tokens(input.cacheRead);
  const write = tokens(input.cacheWrite);
  const total = input.total !== undefined ? tokens(input.total) : Math.min(tokens(input.noCache) + read + write, UINT32_MAX);
  const before = previous?.lastCallCacheReadTokens ?? 0;
  return {
    retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
    lastCallInputTokens: total,
    lastCallCacheReadTokens: read,
    lastCallCacheWriteTokens: write,
    lastCallOutputTokens: tokens(usage.outputTokens.total),
    broke: before >= BROKE_MIN_READ && read * 2 < before,
    lastTouchMs: read + write > 0 ? now : (previous?.lastTouchMs ?? 0),
    expiresAtMs: 0,
  };
}
