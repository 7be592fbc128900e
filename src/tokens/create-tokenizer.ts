import type { Message } from "../contract/gen/contextd/v1/types.js";
import { bpeCounter, heuristicCount } from "./bpe.js";
import { callerGone, TokenCountPool } from "./count-pool.js";
import { messageParts, type MessageParts } from "./message-parts.js";
import type { CountOptions, Tokenizer, TokenizerName, TokenizerOptions } from "./tokenizer.js";

export { MESSAGE_OVERHEAD_TOKENS } from "./message-parts.js";

export const DEFAULT_IMAGE_TOKENS = 1200;

/**
 * With `offload`, counts of fewer characters than this are taken inline: handing them to a thread
 * costs more than counting them (a chat message is a few hundred characters, a tool result a few
 * thousand), and 4,096 characters cost about a millisecond whatever their shape (one BPE piece of
 * 4,096 letters). Everything larger goes to the pool (count-pool.ts), in bounded chunks, fairly
 * between tenants.
 */
export const OFFLOAD_MIN_CHARS = 4_096;

/**
 * Characters counted inline in one turn of the event loop, whatever arrives in it: small counts
 * beyond it go to the pool too, so that many small appends at once (a burst of a thousand tool
 * results) never hold the loop for more than a few milliseconds.
 */
export const INLINE_CHARS_PER_TURN = 16_384;

export function createTokenizer(name: TokenizerName, options: Partial<TokenizerOptions> = {}): Tokenizer {
  const imageTokens = options.imageTokens ?? DEFAULT_IMAGE_TOKENS;
  const countText = name === "heuristic" ? heuristicCount : bpeCounter(name);
  const pool = options.offload && name !== "heuristic" ? new TokenCountPool(name) : undefined;
  const inline = (p: MessageParts) => p.texts.reduce((n, t) => n + countText(t), p.fixed);
  let inlineThisTurn = 0;
  /** Whether `chars` may be counted inline now: small, and within this turn's inline budget. */
  const mayCountInline = (chars: number) => {
    if (chars === 0) return true;
    if (chars >= OFFLOAD_MIN_CHARS || inlineThisTurn + chars > INLINE_CHARS_PER_TURN) return false;
    if (inlineThisTurn === 0) setImmediate(() => (inlineThisTurn = 0));
    inlineThisTurn += chars;
    return true;
  };
  async function countParts(parts: MessageParts[], count: CountOptions): Promise<number[]> {
    const chars = parts.reduce((n, p) => n + p.chars, 0);
    if (!pool || mayCountInline(chars)) {
      if (count.signal?.aborted) throw callerGone(count.signal.reason);
      return parts.map(inline);
    }
    const counts = await pool.count(
      parts.map((p) => p.texts),
      count,
    );
    return counts.map((c, i) => c + parts[i].fixed);
  }
  return {
    name,
    countText,
    countMessage: (message: Message) => inline(messageParts(message, imageTokens)),
    countMessages: (messages: readonly Message[], count: CountOptions = {}) =>
      countParts(
        messages.map((m) => messageParts(m, imageTokens)),
        count,
      ),
    async countTextAsync(text: string, count: CountOptions = {}): Promise<number> {
      const [n] = await countParts([{ texts: [text], fixed: 0, chars: text.length }], count);
      return n;
    },
    stats: () => pool?.stats(),
  };
}
