import { summaryMessage } from "../contract/messages.js";
import type { Tokenizer } from "../tokens/tokenizer.js";

/**
 * Measuring and trimming a summary as it will reach the model: wrapped in the summary user message
 * (marked `contextd.kind` = `compaction_summary`: docs/pinned-messages.md), counted
 * with the host's tokenizer.
 */

/** Tokens the summary occupies in the active view (the whole summary message). */
export function summaryTokens(summary: string, tokenizer: Tokenizer): number {
  return tokenizer.countMessage(summaryMessage(summary));
}

/** Characters per token of `text`, for turning a token target into a character cap. */
export function charsPerToken(text: string, tokenizer: Tokenizer, fallback = 4): number {
  if (!text) return fallback;
  const tokens = tokenizer.countText(text);
  return tokens > 0 ? text.length / tokens : fallback;
}

/**
 * The character cap of a BUDGET compaction's summary: the configured cap, but never more than about
 * half of `room` (the prompt budget the pinned messages leave), so that the summary and the newest
 * tool pairs both fit and the kept tail gets at least the other half. `charsPerToken` is an
 * estimate (prose is ~4 with o200k; identifiers and code fewer, so the real summary may overshoot
 * the half, which the caller's fitting loop corrects by cutting later).
 */
export function budgetSummaryChars(maxChars: number, room: number, emptySummaryTokens: number, charsPerToken = 4): number {
  const half = Math.floor(room / 2) - emptySummaryTokens;
  return Math.max(0, Math.min(Math.floor(maxChars), Math.floor(half * charsPerToken)));
}

const ELLIPSIS = " …";

/** At most `maxChars` characters, never splitting a surrogate pair. */
export function capChars(text: string, maxChars: number): string {
  const max = Math.max(0, Math.floor(maxChars));
  if (text.length <= max) return text;
  let end = max;
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return text.slice(0, end);
}

/**
 * The longest prefix of `summary` whose summary message fits `maxTokens` (marked with an ellipsis
 * when shortened); "" when not even an empty summary fits. The last resort when a summarizer
 * cannot be made to write a short enough summary. O(log n) counts.
 */
export function truncateSummaryToFit(summary: string, maxTokens: number, tokenizer: Tokenizer): string {
  if (summaryTokens(summary, tokenizer) <= maxTokens) return summary;
  const candidate = (len: number): string => (len <= 0 ? "" : capChars(summary, len).trimEnd() + ELLIPSIS);
  const fits = (len: number): boolean => summaryTokens(candidate(len), tokenizer) <= maxTokens;
  let lo = 0; // fits(lo) is assumed; checked below for 0
  let hi = summary.length; // does not fit
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  // BPE counts are not strictly monotone in the prefix length; step down until it really fits.
  while (lo > 0 && !fits(lo)) lo = Math.floor(lo * 0.9);
  return candidate(lo);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
