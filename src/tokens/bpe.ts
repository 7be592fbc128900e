import { createRequire } from "node:module";
import type { TokenizerName } from "./tokenizer.js";

type BpeName = Exclude<TokenizerName, "heuristic">;
interface Encoding {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
  setMergeCacheSize(size: number): void;
}

// Conversation text may contain strings that look like special tokens ("<|endoftext|>"); they are
// ordinary text to us, so nothing is disallowed.
const ENCODE_OPTIONS = { disallowedSpecial: new Set<string>() };

// Each encoding's tables take tens of MB: load only the configured one, on first use. The CJS
// build is required synchronously so that creating a tokenizer stays synchronous.
const require = createRequire(import.meta.url);
const loaded = new Map<BpeName, Encoding>();

function encoding(name: BpeName): Encoding {
  let enc = loaded.get(name);
  if (!enc) {
    enc = require(`gpt-tokenizer/cjs/encoding/${name}`) as Encoding;
    // gpt-tokenizer's merge cache (100k word pieces) degrades after a few million tokens of varied
    // text — counting became 3–10× slower and erratic in a long-running contextd (bench/tokenizer).
    // Without it counting is steady; every entry is counted once anyway.
    enc.setMergeCacheSize(0);
    loaded.set(name, enc);
  }
  return enc;
}

/** A real BPE token counter (gpt-tokenizer). */
export function bpeCounter(name: BpeName): (text: string) => number {
  const enc = encoding(name);
  return (text) => (text ? enc.countTokens(text, ENCODE_OPTIONS) : 0);
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
