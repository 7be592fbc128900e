// The tokenizer for package users (`contextd/tokens`): the counts contextd stores, for engines and
// tools that must count the same way (engines/lossless counts the summaries it writes with it).
export { createTokenizer, DEFAULT_IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS } from "./create-tokenizer.js";
export type { Tokenizer, TokenizerName, TokenizerOptions } from "./tokenizer.js";
