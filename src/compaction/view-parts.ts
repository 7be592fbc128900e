import { isSummaryMessage, summaryOf } from "../contract/messages.js";
import { isSystemMessage } from "../contract/pinned.js";
import type { Message } from "../contract/gen/contextd/v1/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import { suffixSums } from "./cut-points.js";

/**
 * An active view as native compaction reads it (docs/pinned-messages.md):
 *
 *   [pinned system messages] [previous summary] [rest: the kept entries, system messages in place]
 *
 * System messages are never summarized: the ones heading the view stay there, and a cut leaves
 * each one in `rest` either in place (after the cut) or moves it to the head (before it). Either
 * way it stays in the view, so all of them are a fixed cost (`pinnedTokens`) and weigh nothing in
 * the suffix sums that choose the cut; and none is ever handed to the summarizer (`foldable`).
 */
export interface ViewParts {
  hasPrevious: boolean;
  previousSummary: string;
  /** Tokens of the previous summary message (0 without one). */
  previousTokens: number;
  /** The entries after the previous summary (the whole view without one), in view order. */
  rest: Message[];
  /** suffix[i] = tokens of rest[i..] other than system messages; suffix[rest.length] = 0. */
  suffix: Float64Array;
  /** Tokens of every system message of the view: the head and those in `rest`. */
  pinnedTokens: number;
  /** How many system messages the view holds. */
  pinnedMessages: number;
  /** How many messages of `rest` a summary may fold in (all but the system messages). */
  foldableCount: number;
  /**
   * The earliest cut that summarizes at least one foldable message: one past the first of them
   * (rest.length when there is none).
   */
  firstCut: number;
}

export function viewParts(messages: readonly Message[], tokenizer: Tokenizer): ViewParts {
  let lead = 0;
  while (lead < messages.length && isSystemMessage(messages[lead])) lead++;
  const hasPrevious = lead < messages.length && isSummaryMessage(messages[lead]);
  const head = hasPrevious ? messages.slice(0, lead) : [];
  const rest = hasPrevious ? messages.slice(lead + 1) : messages.slice();
  let pinnedTokens = 0;
  let pinnedMessages = 0;
  for (const m of head) {
    pinnedTokens += storedTokens(m, tokenizer);
    pinnedMessages++;
  }
  const weights = rest.map((m) => {
    if (!isSystemMessage(m)) return storedTokens(m, tokenizer);
    pinnedTokens += storedTokens(m, tokenizer);
    pinnedMessages++;
    return 0;
  });
  const first = rest.findIndex((m) => !isSystemMessage(m));
  return {
    hasPrevious,
    previousSummary: hasPrevious ? summaryOf(messages[lead]) : "",
    previousTokens: hasPrevious ? storedTokens(messages[lead], tokenizer) : 0,
    rest,
    suffix: suffixSums(weights),
    pinnedTokens,
    pinnedMessages,
    foldableCount: rest.length - (pinnedMessages - head.length),
    firstCut: first < 0 ? rest.length : first + 1,
  };
}

/** What the summarizer may see of rest[0..cut): everything but the system messages. */
export function foldable(rest: readonly Message[], cut: number): Message[] {
  return rest.slice(0, cut).filter((m) => !isSystemMessage(m));
}

/** The stored count; counted here only when the host left it unset (never for a normal entry). */
export function storedTokens(message: Message, tokenizer: Tokenizer): number {
  return message.tokenCount > 0 ? message.tokenCount : tokenizer.countMessage(message);
}
