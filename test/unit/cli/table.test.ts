import Table from "cli-table3";
import { describe, expect, it } from "vitest";
import { drawTable, type Align } from "../../../src/cli/table.js";

/** contextctl draws its tables itself (cli-table3 is quadratic in rows); the layout must stay cli-table3's compact one. */
function cliTable3(head: string[], rows: string[][], colAligns: Align[]): string {
  const t = new Table({ head, colAligns, style: { head: [], border: [], compact: true } });
  for (const row of rows) t.push(row);
  return t.toString();
}

describe("drawTable", () => {
  const cases: [string, string[], string[][], Align[]][] = [
    [
      "numbers right, text left",
      ["turn", "engine", "tokens"],
      [
        ["1", "legacy", "1,025"],
        ["10", "lossless", "12"],
      ],
      ["right", "left", "right"],
    ],
    ["a header wider than its cells", ["# of things", "x"], [["1", "a"]], ["right", "left"]],
    ["no rows", ["session", "agent"], [], ["left", "left"]],
    [
      "colour codes and wide characters",
      ["n", "name"],
      [
        ["1", "\u001b[32mgreen\u001b[39m"],
        ["", "日本語"],
        ["2", "a → b"],
      ],
      ["right", "left"],
    ],
  ];
  for (const [what, head, rows, aligns] of cases) {
    it(`draws what cli-table3 draws: ${what}`, () => {
      expect(drawTable(head, rows, aligns)).toBe(cliTable3(head, rows, aligns));
    });
  }

  it("keeps a row on one line and is fast for big tables", () => {
    expect(drawTable(["a"], [["one\ntwo"]], ["left"]).split("\n")).toHaveLength(5);
    const rows = Array.from({ length: 50_000 }, (_, i) => [String(i), `entry ${i}`, "some preview text of a message"]);
    const started = performance.now();
    expect(drawTable(["seq", "id", "text"], rows, ["right", "left", "left"]).split("\n")).toHaveLength(50_004);
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});
