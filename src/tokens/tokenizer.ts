import type { Message } from "../contract/gen/contextd/v1/types.js";

export type TokenizerName = "o200k_base" | "cl100k_base" | "heuristic";

/** Counts tokens of text and messages. Counts are taken once per entry, at append, and stored. */
export interface Tokenizer {
  readonly name: TokenizerName;
  countText(text: string): number;
  countMessage(message: Message): number;
}

export interface TokenizerOptions {
  /** Tokens an image block counts as (images are not tokenized). */
  imageTokens: number;
}
