import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { boundedText, hasUnsafeCharacters, quote } from "../../../src/contract/quote.js";

/** What must never reach a terminal or a log viewer raw. */
const RAW = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/;
const hostile = fc.string({
  unit: fc.constantFrom("a", " ", "\\", "u", "\u001b", "\u0007", "\u202e", "\u200b", "\u2028", "\u0085", "[", "8", "m"),
  maxLength: 3000,
});

describe("untrusted text in messages", () => {
  it("boundedText: never a raw control, bidi or zero-width character, never more than max characters plus the length note, never a cut escape", () => {
    fc.assert(
      fc.property(hostile, fc.integer({ min: 8, max: 1200 }), (text, max) => {
        const out = boundedText(text, max);
        expect(out).not.toMatch(RAW);
        const note = ` (${text.length} characters)`;
        if (out.endsWith(note)) {
          const body = out.slice(0, -note.length - 1); // less the ellipsis
          expect(body.length).toBeLessThanOrEqual(max);
          expect(body).not.toMatch(/\\u[0-9a-f]{0,3}$/);
        } else {
          expect(out.length).toBeLessThanOrEqual(max);
          expect(text.length).toBeLessThanOrEqual(max); // only a text that fit is shown whole
        }
      }),
      // An escape of ours cut short right after a backslash-u of the text's own.
      { examples: [["\u202e\\u\u202e", 10]] },
    );
  });

  it("quote: the same characters escaped, inside quotes, cut to max", () => {
    fc.assert(
      fc.property(hostile, (text) => {
        const out = quote(text);
        expect(out).not.toMatch(RAW);
        expect(out.startsWith('"')).toBe(true);
      }),
    );
  });

  it("hasUnsafeCharacters finds each class and passes plain text", () => {
    for (const c of ["\u0000", "\u001b", "\u007f", "\u0085", "\u200b", "\u2028", "\u202e", "\u2066", "\ufeff"])
      expect(hasUnsafeCharacters(`a${c}b`)).toBe(true);
    expect(hasUnsafeCharacters("plain text, ümlauts and 日本語")).toBe(false);
    expect(hasUnsafeCharacters("plain text")).toBe(false); // the regex's lastIndex does not carry over
  });
});
