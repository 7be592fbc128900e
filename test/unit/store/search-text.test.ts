import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { InvalidArgumentError } from "../../../src/contract/errors.js";
import { fts5Match, indexText, parseQuery, snippetAndScore, tsqueryLiteral, words } from "../../../src/store/search-text.js";

const slow = (text: string) =>
  words(text)
    .map((w) => w.word)
    .join(" ");

describe("search text (src/store/search-text.ts)", () => {
  it("the append path's index text is exactly the words the snippet and score see, for any text", () => {
    const texts = [
      "Fix src/billing/invoice_rounding.ts (BILL-4821): totals ✓ × — done",
      "Café crème, naïve résumé; ÉCOLE",
      "İstanbul ﬁle ½ ™ Ⅻ ①",
      `${"a".repeat(100)} ${"b".repeat(101)} c`,
      "x ".repeat(12_000),
      "日本語のテキスト and ASCII",
      "tabs\tand\nnewlines\r\nmixed",
      "",
      "***",
    ];
    for (const t of texts) expect(indexText(t), t.slice(0, 40)).toBe(slow(t));
    expect(indexText("x ".repeat(12_000)).split(" ").length).toBe(10_000);
  });

  it("the append path's index text is exactly the words the snippet and score see, for arbitrary text", () => {
    const unit = fc.constantFrom(" ", "  ", "\n", "a", "Z", "q7", "_", ".", "-", "✓", "—", "é", "日本", "Ⓐ", "K", "x".repeat(60), "Y".repeat(101), "1 ");
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit, maxLength: 40 }),
          fc.string({ unit: "grapheme", maxLength: 60 }),
          fc.string({ unit: fc.constantFrom("a ", "b"), maxLength: 12_000 }),
        ),
        (t) => {
          expect(indexText(t)).toBe(slow(t));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a query becomes phrases of words, and no user text becomes FTS5 or tsquery syntax", () => {
    expect(parseQuery('invoice_rounding.ts "totals are OFF" -x NEAR( OR *').terms).toEqual([
      ["invoice", "rounding", "ts"],
      ["totals", "are", "off"],
      ["x"],
      ["near"],
      ["or"],
    ]);
    const q = parseQuery(`a"b 'c' body:d \\e`);
    expect(fts5Match(q)).toBe('body : "a" AND body : "b c body d e"');
    expect(tsqueryLiteral(q)).toBe("'a' & ('b' <-> 'c' <-> 'body' <-> 'd' <-> 'e')");
    expect(parseQuery("Same same SAME").terms).toEqual([["same"]]);
  });

  it("refuses empty, overlong and wordless queries naming the field", () => {
    for (const q of [
      "",
      "   ",
      "x".repeat(513),
      "*** ---",
      Array.from({ length: 17 }, (_, i) => `w${i}`).join(" "),
      `"${Array.from({ length: 33 }, (_, i) => `w${i}`).join(" ")}"`,
    ]) {
      const err = (() => {
        try {
          parseQuery(q);
        } catch (e) {
          return e;
        }
      })();
      expect(err, q.slice(0, 20)).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toMatch(/^query /);
    }
  });

  it("a snippet marks every match inside it, shows the text's own markers as ‹ ›, and stays bounded", () => {
    const { snippet, score } = snippetAndScore("see «this» in invoice_rounding.ts\nand invoice_rounding.ts again", parseQuery("invoice_rounding.ts"));
    expect(snippet).toBe("see ‹this› in «invoice_rounding.ts» and «invoice_rounding.ts» again");
    expect(score).toBeGreaterThan(0);
    const long = `${"lorem ipsum ".repeat(200)}needle ${"dolor sit ".repeat(200)}`;
    const cut = snippetAndScore(long, parseQuery("needle")).snippet;
    expect(cut).toMatch(/^….*«needle».*…$/);
    expect(cut.replace(/[«»…]/g, "").length).toBeLessThanOrEqual(240);
    // More occurrences score higher; no match scores 0 and shows the start.
    expect(snippetAndScore("needle needle", parseQuery("needle")).score).toBeGreaterThan(snippetAndScore("needle hay", parseQuery("needle")).score);
    expect(snippetAndScore("hay", parseQuery("needle"))).toEqual({ snippet: "hay", score: 0 });
  });
});
