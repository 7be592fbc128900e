import type { Message } from "../contract/gen/contextd/v1/types.js";

export type TokenizerName = "o200k_base" | "cl100k_base" | "heuristic";

/** Counts tokens of text and messages. Counts are taken once per entry, at append, and stored. */
export interface Tokenizer {
  readonly name: TokenizerName;
  countText(text: string): number;
  countMessage(message: Message): number;
  /**
   * The same counts as `countMessage`, for a whole append: a large one is counted on a worker
   * thread when the tokenizer was created with `offload`, so that BPE over megabytes of text does
   * not stall every other call on the event loop (bench assemble_under_load).
   */
  countMessages(messages: readonly Message[]): Promise<number[]>;
}

export interface TokenizerOptions {
  /** Tokens an image block counts as (images are not tokenized). */
  imageTokens: number;
  /** Count large appends on worker threads (contextd's server does; tools count inline). */
  offload: boolean;
}
