import type { Message } from "../contract/gen/contextd/v1/types.js";
import { bpeCounter, heuristicCount } from "./bpe.js";
import type { Tokenizer, TokenizerName, TokenizerOptions } from "./tokenizer.js";

/**
 * Per-message overhead of chat formats (role marker and separators), as OpenAI documents for its
 * chat models. Counted so that a context of many short messages is not underestimated.
 */
export const MESSAGE_OVERHEAD_TOKENS = 4;

export const DEFAULT_IMAGE_TOKENS = 1200;

export function createTokenizer(name: TokenizerName, options: Partial<TokenizerOptions> = {}): Tokenizer {
  const imageTokens = options.imageTokens ?? DEFAULT_IMAGE_TOKENS;
  const countText = name === "heuristic" ? heuristicCount : bpeCounter(name);
  return {
    name,
    countText,
    countMessage(message: Message): number {
      let tokens = MESSAGE_OVERHEAD_TOKENS;
      for (const block of message.content) {
        const b = block.block;
        if (!b) continue;
        switch (b.$case) {
          case "text":
            tokens += countText(b.value.text);
            break;
          case "thinking":
            tokens += countText(b.value.thinking);
            break;
          case "toolCall":
            tokens += countText(b.value.name) + countText(b.value.argumentsJson) + 3;
            break;
          case "image":
            tokens += imageTokens;
            break;
        }
      }
      if (message.toolName) tokens += countText(message.toolName);
      return tokens;
    },
  };
}
