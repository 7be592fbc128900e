import { createRequire } from "node:module";
import { PieceCounts } from "./piece-counts.js";
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

// The encodings' piece patterns (global, unicode), as gpt-tokenizer splits with them.
const patterns = require("gpt-tokenizer/cjs/encodingParams/constants") as Record<"O200K_TOKEN_SPLIT_REGEX" | "CL100K_TOKEN_SPLIT_REGEX", RegExp>;
const SPLIT: Record<BpeName, RegExp> = { o200k_base: patterns.O200K_TOKEN_SPLIT_REGEX, cl100k_base: patterns.CL100K_TOKEN_SPLIT_REGEX };

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

/**
 * A real BPE token counter (gpt-tokenizer): the text is split into pieces by the encoding's own
 * pattern and each piece's count comes from PieceCounts, or from gpt-tokenizer on a miss. The sum is
 * the count of the whole text, since BPE encodes every piece on its own (test/unit/bpe-pieces.test.ts
 * compares the two). Each counter has its own cache; a thread makes its own counter.
 */
export function bpeCounter(name: BpeName): (text: string) => number {
  const enc = encoding(name);
  const pattern = SPLIT[name];
  const pieces = new PieceCounts();
  return (text) => {
    if (!text) return 0;
    let n = 0;
    for (const [piece] of text.matchAll(pattern)) {
      let c = pieces.get(piece);
      if (c === undefined) {
        c = enc.countTokens(piece, ENCODE_OPTIONS);
        pieces.set(piece, c);
      }
      n += c;
    }
    return n;
  };
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
