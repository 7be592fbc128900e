import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { asciiPieceEnd } from "./ascii-pieces.js";
import { BpeMerger } from "./bpe-merge.js";
import { BpeRanks } from "./bpe-ranks.js";
import { PieceCounts } from "./piece-counts.js";
import type { TokenizerName } from "./tokenizer.js";

export type BpeName = Exclude<TokenizerName, "heuristic">;

const require = createRequire(import.meta.url);

// The encodings' piece patterns (global, unicode), as gpt-tokenizer splits with them.
const patterns = require("gpt-tokenizer/cjs/encodingParams/constants") as Record<"O200K_TOKEN_SPLIT_REGEX" | "CL100K_TOKEN_SPLIT_REGEX", RegExp>;
const SPLIT: Record<BpeName, RegExp> = { o200k_base: patterns.O200K_TOKEN_SPLIT_REGEX, cl100k_base: patterns.CL100K_TOKEN_SPLIT_REGEX };

/** This thread's rank tables: built here on first use, or the main thread's, shared (adoptBpeRanks). */
const tables = new Map<BpeName, BpeRanks>();

/**
 * The encoding's rank table, built on first use (tens of milliseconds) from the `.tiktoken` file
 * gpt-tokenizer ships (bpe-ranks.ts says why not from its generated JavaScript list).
 */
export function bpeRanks(name: BpeName): BpeRanks {
  let table = tables.get(name);
  if (!table) {
    table = BpeRanks.fromTiktoken(readFileSync(require.resolve(`gpt-tokenizer/data/${name}.tiktoken`)));
    tables.set(name, table);
  }
  return table;
}

/** Uses a table another thread built (its buffer is shared: nothing is copied or rebuilt). */
export function adoptBpeRanks(name: BpeName, buffer: SharedArrayBuffer): void {
  tables.set(name, new BpeRanks(buffer));
}

/**
 * A real BPE token counter: the text is split into pieces by the encoding's own pattern (BPE
 * encodes every piece on its own), and each piece's count comes from PieceCounts, or from a merge
 * over the shared rank table on a miss. The sum is what gpt-tokenizer counts for the whole text,
 * special-token text counted as ordinary text (test/tokens/bpe-pieces.test.ts compares the two).
 * Each counter has its own cache and scratch space; a thread makes its own counter.
 */
export function bpeCounter(name: BpeName): (text: string) => number {
  const span = bpeSpanCounter(name);
  return (text) => (text ? span(text, true, Infinity)[0] : 0);
}

/**
 * Characters at the end of a slice whose pieces are not trusted when the slice is not the text's
 * end: the split pattern looks at most a few characters past a piece (a lookahead of one, the
 * `'re` of a contraction), so a piece that ends this far before the cut is the piece the whole
 * text has there.
 */
export const SPAN_MARGIN = 64;

/**
 * Longer pieces are not remembered: they are rare in real text (runs of one character), and a cache
 * of 40,000 pieces of 16k characters each would hold over a gigabyte of one tenant's text.
 */
const MAX_CACHED_PIECE = 256;

/**
 * Counts a slice of a text exactly as the whole text's count would count it, so that one long text
 * can be counted in bounded parts (count-pool.ts). `slice` starts where a piece of the whole text
 * starts (its start, or where the previous part stopped); `end` says whether it runs to the text's
 * end. Pieces are counted in order while they start before `limit` and — unless `end` — end at
 * least SPAN_MARGIN characters before the slice does. Answers the count and `consumed`: where the
 * next part starts (the end of the last piece counted; 0 when the first piece did not fit, which
 * only a piece longer than the slice less the margin does).
 *
 * Exact because a global pattern scans a text by matching from where its previous match ended:
 * matching from `consumed` in the rest of the text finds the pieces the whole scan finds there.
 */
export function bpeSpanCounter(name: BpeName): (slice: string, end: boolean, limit: number) => [count: number, consumed: number] {
  const merger = new BpeMerger(bpeRanks(name));
  const pattern = new RegExp(SPLIT[name].source, SPLIT[name].flags);
  const pieces = new PieceCounts();
  const mergeCount = (piece: string) => merger.count(piece);
  // o200k_base's pieces of ASCII text are found by hand (ascii-pieces.ts), the pattern asked only
  // where a character above U+007F decides a piece.
  const asciiEnd = name === "o200k_base" ? asciiPieceEnd : () => -1;
  return (slice, end, limit) => {
    let n = 0;
    let consumed = 0;
    const trusted = end ? Infinity : slice.length - SPAN_MARGIN;
    // The pattern matches every character, so a piece starts where the previous one stopped: from
    // there, the pattern's next match is the piece.
    for (let at = 0; at < slice.length && at < limit;) {
      let stop = asciiEnd(slice, at);
      if (stop < 0) {
        pattern.lastIndex = at;
        const m = pattern.exec(slice);
        if (m === null) {
          // Said to be consumed whole anyway, so that a caller cutting a text into slices reaches its end.
          if (end) consumed = slice.length;
          break;
        }
        stop = m.index + m[0].length;
      }
      if (stop > trusted) break;
      n += stop - at > MAX_CACHED_PIECE ? merger.count(slice.slice(at, stop)) : pieces.countOf(slice, at, stop, mergeCount);
      consumed = at = stop;
    }
    return [n, consumed];
  };
}

/**
 * Where the piece of `text` that starts at `start` ends, matched with the whole text as context (a
 * piece's end can depend on the characters after it). `start` must be where a piece starts.
 */
export function bpePieceEnd(name: BpeName): (text: string, start: number) => number {
  const pattern = new RegExp(SPLIT[name].source, SPLIT[name].flags);
  return (text, start) => {
    pattern.lastIndex = start;
    const m = pattern.exec(text);
    return m ? m.index + m[0].length : text.length;
  };
}

/** The count of one BPE piece (a whole match of the split pattern), merged without a cache. */
export function bpePieceCounter(name: BpeName): (piece: string) => number {
  const merger = new BpeMerger(bpeRanks(name));
  return (piece) => merger.count(piece);
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
