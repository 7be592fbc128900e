import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { asciiPieceEnd } from "../../src/tokens/ascii-pieces.js";

// asciiPieceEnd is o200k_base's split pattern by hand, for ASCII: at every piece the pattern finds,
// it must answer the pattern's end, or -1 (ask the pattern) — and -1 only where a character above
// U+007F is read.
const require = createRequire(import.meta.url);
const { O200K_TOKEN_SPLIT_REGEX } = require("gpt-tokenizer/cjs/encodingParams/constants") as { O200K_TOKEN_SPLIT_REGEX: RegExp };

function patternPieces(text: string): Array<[number, number]> {
  const re = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags);
  return [...text.matchAll(re)].map((m) => [m.index, m.index + m[0].length]);
}

const ASCII_UNITS = [" ", "  ", "\n", "\r\n", "\r", "\t", "\v", "\f", "'", "'s", "'S", "'ll", "'LL", "'Ve", "'re", "'d", "'m", "'t", "'x"];
const MORE_UNITS = [
  "a",
  "b",
  "Z",
  "Q",
  "ab",
  "Ab",
  "ABc",
  "1",
  "12",
  "1234",
  "-",
  "/",
  "//",
  ".",
  "(",
  "{}",
  "_",
  "\x00",
  "\x1f",
  "\x7f",
  "<|endoftext|>",
  "x_y",
  "http://a.b/c",
];
const WIDE_UNITS = ["é", "É", "ß", "日本", "🎉", "\u00a0", "\u2028", "\u3000", "—", "٣", "\u0301", "ǅ"];

const asciiText = fc.string({ unit: fc.constantFrom(...ASCII_UNITS, ...MORE_UNITS), maxLength: 60 });
const mixedText = fc.string({ unit: fc.constantFrom(...ASCII_UNITS, ...MORE_UNITS, ...WIDE_UNITS), maxLength: 60 });

describe("asciiPieceEnd (o200k_base's split pattern, by hand, for ASCII)", () => {
  it("ends every piece of ASCII text where the pattern ends it", () => {
    fc.assert(
      fc.property(fc.oneof(asciiText, fc.string({ unit: fc.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)), maxLength: 80 })), (t) => {
        for (const [start, end] of patternPieces(t)) expect([start, asciiPieceEnd(t, start)]).toEqual([start, end]);
      }),
      { numRuns: 5000 },
    );
  });

  it("on text with other characters, answers the pattern's end or -1 (ask the pattern), and -1 only with such a character ahead", () => {
    fc.assert(
      fc.property(fc.oneof(mixedText, fc.string({ unit: "grapheme", maxLength: 40 })), (t) => {
        for (const [start, end] of patternPieces(t)) {
          const got = asciiPieceEnd(t, start);
          if (got === -1) {
            // The piece, or a character of the run after it, is not ASCII.
            expect(/[^\x00-\x7f]/.test(t.slice(start))).toBe(true);
          } else expect(got).toBe(end);
        }
      }),
      { numRuns: 5000 },
    );
  });

  it("reads a long run once: a 200,000-character run of one letter, space or mark is one piece, found in linear time", () => {
    for (const unit of ["a", "Z", " ", ".", "\n", "7"]) {
      const t = unit.repeat(200_000);
      const pieces = patternPieces(t);
      let at = 0;
      for (const [start, end] of pieces) {
        expect(start).toBe(at);
        expect(asciiPieceEnd(t, start)).toBe(end);
        at = end;
      }
      expect(at).toBe(t.length);
    }
  });
});
