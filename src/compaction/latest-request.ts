import { messageText } from "../contract/messages.js";
import { Role, type Message } from "../contract/gen/contextd/v1/types.js";

/**
 * The latest user request survives a cut inside its own turn, verbatim.
 *
 * A BUDGET compaction may cut inside the newest turn (at a tool-pair boundary) when that turn is
 * too big to keep whole: the kept tail then starts after the user message the agent is working on.
 * The active view is the summary plus a contiguous tail, so that message can only survive in the
 * summary. The summarizer is asked to keep it (the extractive one does, under "Latest user
 * request"), but a summarizer may paraphrase or drop it; then native compaction appends it,
 * verbatim, under LATEST_REQUEST_HEADING — within the same character cap, so the summary's bound
 * holds. A request too long to quote (over half the cap) is left to the summarizer.
 */

export const LATEST_REQUEST_HEADING = "Latest user request (verbatim):";

/** Index in `rest` of the last user message, -1 without one. */
export function latestUserIndex(rest: readonly Message[]): number {
  for (let i = rest.length - 1; i >= 0; i--) if (rest[i].role === Role.ROLE_USER) return i;
  return -1;
}

/** The text to append for `request` within `maxChars`, "" when it is too long to quote. */
export function requestQuote(request: Message, maxChars: number): string {
  const text = messageText(request).trim();
  if (!text) return "";
  const quote = `\n\n${LATEST_REQUEST_HEADING}\n${text}`;
  return quote.length <= Math.floor(maxChars / 2) ? quote : "";
}

/**
 * `summary` (written within `maxChars − quote.length`) with the request quoted at its end, unless
 * it already holds the request's text verbatim. `quoted` says whether the quote was appended.
 */
export function withRequest(summary: string, request: Message, quote: string): { summary: string; quoted: boolean } {
  if (!quote || summary.includes(messageText(request).trim())) return { summary, quoted: false };
  return { summary: summary.trimEnd() + quote, quoted: true };
}
