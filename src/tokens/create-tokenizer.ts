import type { Message } from "../contract/gen/contextd/v1/types.js";
import { bpeCounter, heuristicCount } from "./bpe.js";
import { TokenCountPool } from "./count-pool.js";
import { messageParts, type MessageParts } from "./message-parts.js";
import type { Tokenizer, TokenizerName, TokenizerOptions } from "./tokenizer.js";

export { MESSAGE_OVERHEAD_TOKENS } from "./message-parts.js";

export const DEFAULT_IMAGE_TOKENS = 1200;

/**
 * Appends with fewer characters than this are counted inline: handing them to a thread costs more
 * than counting them (a single chat message is a few hundred characters).
 */
export const OFFLOAD_MIN_CHARS = 16_384;

export function createTokenizer(name: TokenizerName, options: Partial<TokenizerOptions> = {}): Tokenizer {
  const imageTokens = options.imageTokens ?? DEFAULT_IMAGE_TOKENS;
  const countText = name === "heuristic" ? heuristicCount : bpeCounter(name);
  const pool = options.offload && name !== "heuristic" ? new TokenCountPool(name) : undefined;
  const inline = (p: MessageParts) => p.texts.reduce((n, t) => n + countText(t), p.fixed);
  return {
    name,
    countText,
    countMessage: (message: Message) => inline(messageParts(message, imageTokens)),
    async countMessages(messages: readonly Message[]): Promise<number[]> {
      const parts = messages.map((m) => messageParts(m, imageTokens));
      const chars = parts.reduce((n, p) => n + p.chars, 0);
      if (pool && chars >= OFFLOAD_MIN_CHARS) {
        try {
          const counts = await pool.count(
            parts.map((p) => p.texts),
            chars,
          );
          return counts.map((c, i) => c + parts[i].fixed);
        } catch {
          // The thread failed (and a fresh one starts next time): an append never fails for it.
        }
      }
      return parts.map(inline);
    },
  };
}
