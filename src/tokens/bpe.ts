import * as cl100k from "gpt-tokenizer/encoding/cl100k_base";
import * as o200k from "gpt-tokenizer/encoding/o200k_base";
import type { TokenizerName } from "./tokenizer.js";

// Conversation text may contain strings that look like special tokens ("<|endoftext|>"); they are
// ordinary text to us, so nothing is disallowed.
const ENCODE_OPTIONS = { disallowedSpecial: new Set<string>() };

const COUNTERS: Record<Exclude<TokenizerName, "heuristic">, (text: string) => number> = {
  o200k_base: (text) => o200k.countTokens(text, ENCODE_OPTIONS),
  cl100k_base: (text) => cl100k.countTokens(text, ENCODE_OPTIONS),
};

/** A real BPE token counter (gpt-tokenizer). */
export function bpeCounter(name: Exclude<TokenizerName, "heuristic">): (text: string) => number {
  return COUNTERS[name];
}

/**
 * A fast estimate for when exact counts are not worth their cost: about 4 characters per token for
 * prose, denser for code and non-Latin scripts. Never used unless configured.
 */
export function heuristicCount(text: string): number {
  if (!text) return 0;
  let nonAscii = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 127) nonAscii++;
  return Math.ceil((text.length - nonAscii) / 4 + nonAscii / 1.5);
}
