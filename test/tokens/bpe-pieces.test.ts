import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bpeCounter, bpeRanks } from "../../src/tokens/bpe.js";
import { BpeRanks, NO_RANK } from "../../src/tokens/bpe-ranks.js";
import { PieceCounts } from "../../src/tokens/piece-counts.js";

// bpeCounter sums cached counts of the pieces the encoding's pattern splits a text into; that must be
// exactly what gpt-tokenizer counts for the whole text (special-token text counted as ordinary text).
const require = createRequire(import.meta.url);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const NAMES = ["o200k_base", "cl100k_base"] as const;
const whole = Object.fromEntries(
  NAMES.map((name) => {
    const enc = require(`gpt-tokenizer/cjs/encoding/${name}`) as { countTokens(t: string, o: object): number };
    return [name, (t: string) => enc.countTokens(t, { disallowedSpecial: new Set() })];
  }),
) as Record<(typeof NAMES)[number], (t: string) => number>;

/** Real text: this repository's sources, docs and README (prose, code, tables), in ~1.6k-character chunks. */
function corpus(): string[] {
  const texts: string[] = [];
  for (const dir of ["src/compaction", "src/host", "docs", "engines/recall", "clients/python/contextd"]) {
    for (const f of readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })) {
      if (!/\.(ts|md|py)$/.test(f)) continue;
      const s = readFileSync(path.join(ROOT, dir, f), "utf8");
      for (let i = 0; i < s.length; i += 1600) texts.push(s.slice(i, i + 1600));
    }
  }
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  for (let i = 0; i < readme.length; i += 1600) texts.push(readme.slice(i, i + 1600));
  return texts;
}

// Whitespace runs, newlines, contractions, digits, case changes, scripts and emoji are where the
// patterns' alternatives (and their lookahead) differ.
const tricky = fc.string({
  unit: fc.constantFrom(" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "a", "Z", "é", "ß", "日本", "🎉", "1", "234", "-", "/", "<|endoftext|>", "x_y", "."),
  maxLength: 60,
});

describe("bpeCounter (pieces counted with a cache)", () => {
  for (const name of NAMES) {
    it(`${name}: counts real text exactly as gpt-tokenizer counts it whole`, () => {
      const count = bpeCounter(name);
      const texts = corpus();
      expect(texts.length).toBeGreaterThan(500);
      // Twice: the second pass is answered from the cache.
      for (let pass = 0; pass < 2; pass++) for (const t of texts) expect(count(t)).toBe(whole[name](t));
    });

    it(`${name}: counts arbitrary text exactly as gpt-tokenizer counts it whole`, () => {
      const count = bpeCounter(name);
      fc.assert(
        fc.property(fc.oneof(tricky, fc.string({ unit: "grapheme", maxLength: 80 }), fc.string({ unit: "binary", maxLength: 40 })), (t) => {
          // The one place the oracle is wrong: gpt-tokenizer keys its ranks by strings made with a
          // TextDecoder, which drops a byte-order mark at the start of a piece (below).
          fc.pre(!t.includes("\uFEFF"));
          expect(count(t)).toBe(whole[name](t));
        }),
        { numRuns: 3000 },
      );
    });
  }
});

/**
 * Adversarial shapes: one long piece (a run of one letter, of spaces, of punctuation, of digits, of
 * one CJK character, of emoji with joiners, of alternating pairs, of brackets), where a merge that
 * rescans every pair at every step is quadratic. Counts must still be gpt-tokenizer's exactly.
 */
const RUN_UNITS = ["a", "Z", " ", "\t", "\n", "!", ".", "[", "[{", "0", "7", "日", "한", "é", "👍🏽", "👨‍👩‍👧", "ab", "xy ", "=>", "_", "-"];
const arbRun = fc
  .record({
    prefix: fc.constantFrom("", " ", "x", "\n", "1"),
    unit: fc.constantFrom(...RUN_UNITS),
    times: fc.integer({ min: 1, max: 3_000 }),
    suffix: fc.constantFrom("", " ", "x", "!", "\n"),
  })
  .map(({ prefix, unit, times, suffix }) => prefix + unit.repeat(times) + suffix);

describe("bpeCounter on adversarial text (long runs that are one piece)", () => {
  for (const name of NAMES) {
    it(`${name}: counts runs of up to thousands of one unit exactly as gpt-tokenizer counts them`, () => {
      const count = bpeCounter(name);
      fc.assert(
        fc.property(arbRun, (t) => {
          expect(count(t)).toBe(whole[name](t));
        }),
        { numRuns: 150 },
      );
    });
  }
});

describe("a byte-order mark (U+FEFF) is counted as tiktoken counts it", () => {
  it("one token where the encoding has its three bytes as one key; gpt-tokenizer says two", () => {
    for (const name of NAMES) {
      const bom = Buffer.from("\uFEFF", "utf8");
      // EF BB BF is a key of both encodings (cl100k 3305, o200k 5574): byte-level BPE merges it whole.
      expect(bpeRanks(name).rank(bom, 0, bom.length)).toBe(name === "cl100k_base" ? 3305 : 5574);
      expect(bpeCounter(name)("\uFEFF")).toBe(1);
      // gpt-tokenizer decodes the merged bytes with TextDecoder, which drops a leading BOM, so it
      // finds no key for the piece and falls back to smaller parts.
      expect(whole[name]("\uFEFF")).toBe(2);
    }
  });
});

describe("BpeRanks (the shared rank table)", () => {
  for (const name of NAMES) {
    it(`${name}: holds every key of gpt-tokenizer's rank list at its rank, and nothing else`, () => {
      const list = require(`gpt-tokenizer/cjs/bpeRanks/${name}`) as { default: (string | number[] | undefined)[] };
      const table = bpeRanks(name);
      expect(table.buffer).toBeInstanceOf(SharedArrayBuffer);
      let keys = 0;
      list.default.forEach((key, rank) => {
        if (key === undefined) return;
        keys++;
        const bytes = typeof key === "string" ? Buffer.from(key, "utf8") : Uint8Array.from(key);
        expect(table.rank(bytes, 0, bytes.length)).toBe(rank);
      });
      expect(table.size).toBe(keys);
      const absent = Buffer.from("not-a-token-\u00e9\u00e9\u00e9-xyz", "utf8");
      expect(table.rank(absent, 0, absent.length)).toBe(NO_RANK);
      // A key's bytes inside a longer buffer: only the range is looked up.
      const padded = Buffer.concat([Buffer.from("zz"), Buffer.from(" the"), Buffer.from("zz")]);
      expect(table.rank(padded, 2, 6)).toBe(table.rank(Buffer.from(" the"), 0, 4));
    });
  }
});

describe("BpeRanks.fromTiktoken", () => {
  const tiktoken = (text: string) => Buffer.from(text, "latin1");

  it("reads tiktoken's format: base64 keys (padding, any bytes), decimal ranks, CRLF or LF, a last line without one", () => {
    const keys = [Buffer.from("a"), Buffer.from("ab"), Buffer.from([0xff, 0x00, 0x80]), Buffer.from("hello world")];
    const text = keys.map((k, i) => `${k.toString("base64")} ${i * 7}${i === 1 ? "\r" : ""}`).join("\n");
    const table = BpeRanks.fromTiktoken(tiktoken(text));
    expect(table.size).toBe(keys.length);
    keys.forEach((k, i) => expect(table.rank(k, 0, k.length)).toBe(i * 7));
    expect(table.rank(Buffer.from("b"), 0, 1)).toBe(NO_RANK);
  });

  it("refuses a line it cannot read, naming where", () => {
    expect(() => BpeRanks.fromTiktoken(tiktoken("YQ== 0\nYg==\n"))).toThrow(".tiktoken line at byte 7 has no rank");
    expect(() => BpeRanks.fromTiktoken(tiktoken("Y*== 0\n"))).toThrow(".tiktoken key at byte 0 is not base64");
    expect(() => BpeRanks.fromTiktoken(tiktoken("YQ== x1\n"))).toThrow(".tiktoken rank at byte 5 is not a number");
  });
});

describe("PieceCounts", () => {
  it("keeps a piece in use: one found in the previous generation moves to the current one", () => {
    const c = new PieceCounts(2);
    c.set("a", 1);
    c.set("b", 2);
    c.set("c", 3); // rollover: {a, b} become the previous generation
    expect(c.get("a")).toBe(1); // promoted: current is {c, a}
    c.set("d", 4); // rollover: {c, a} become the previous generation, b is dropped
    expect([c.get("a"), c.get("b"), c.get("d")]).toEqual([1, undefined, 4]);
  });

  it("keeps two generations: a piece not used survives one rollover, not two", () => {
    const c = new PieceCounts(2);
    c.set("a", 1);
    c.set("b", 2);
    c.set("c", 3); // rollover: {a, b} become the previous generation
    expect(c.get("c")).toBe(3);
    c.set("d", 4);
    c.set("e", 5); // rollover again: {a, b} are dropped
    expect([c.get("a"), c.get("b")]).toEqual([undefined, undefined]);
    expect([c.get("c"), c.get("e")]).toEqual([3, 5]);
    expect(c.size).toBeLessThanOrEqual(4);
  });
});
