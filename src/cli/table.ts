/**
 * contextctl's boxed tables, drawn in cli-table3's compact style (the layout scripts and tests
 * already read: a header, a rule, then one line per row):
 *
 *   ┌──────┬──────────┐
 *   │ turn │ messages │
 *   ├──────┼──────────┤
 *   │    1 │        5 │
 *   └──────┴──────────┘
 *
 * Drawn here rather than by cli-table3 because that one takes time quadratic in the rows (20,000
 * transcript entries took over 20 s); this is one pass. A cell is always one line (newlines become
 * spaces), colour codes take no room, and East Asian wide characters and emoji take two columns.
 */

import { terminalCell } from "./terminal-text.js";

export type Align = "left" | "right";

const ANSI = /\u001b\[[0-9;]*m/g;

/** Columns a string takes on a terminal. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text.replace(ANSI, "")) {
    const c = ch.codePointAt(0)!;
    if (c < 0x20 || (c >= 0x300 && c <= 0x36f) || c === 0x200d || (c >= 0xfe00 && c <= 0xfe0f)) continue;
    width += isWide(c) ? 2 : 1;
  }
  return width;
}

function isWide(c: number): boolean {
  return (
    (c >= 0x1100 && c <= 0x115f) ||
    (c >= 0x2e80 && c <= 0xa4cf && c !== 0x303f) ||
    (c >= 0xac00 && c <= 0xd7a3) ||
    (c >= 0xf900 && c <= 0xfaff) ||
    (c >= 0xfe30 && c <= 0xfe4f) ||
    (c >= 0xff00 && c <= 0xff60) ||
    (c >= 0xffe0 && c <= 0xffe6) ||
    (c >= 0x1f300 && c <= 0x1faff) ||
    (c >= 0x20000 && c <= 0x3fffd)
  );
}

function pad(text: string, width: number, align: Align): string {
  const room = " ".repeat(Math.max(0, width - displayWidth(text)));
  return align === "right" ? room + text : text + room;
}

/** Draws `head` over `rows` (cells already formatted as text), each column aligned as `aligns` says. */
export function drawTable(head: string[], rows: string[][], aligns: Align[]): string {
  // Cells are one line; anything that would act on the terminal shows escaped (contextctl's own colours pass).
  const flat = (cell: string | undefined) => terminalCell((cell ?? "").replace(/\r?\n/g, " "));
  const widths = head.map((h) => displayWidth(h));
  const body = rows.map((row) => head.map((_, i) => flat(row[i])));
  for (const row of body) row.forEach((cell, i) => (widths[i] = Math.max(widths[i], displayWidth(cell))));
  const rule = (left: string, mid: string, right: string) => left + widths.map((w) => "─".repeat(w + 2)).join(mid) + right;
  const line = (cells: string[]) => `│ ${cells.map((c, i) => pad(c, widths[i], aligns[i] ?? "left")).join(" │ ")} │`;
  const out = [rule("┌", "┬", "┐"), line(head.map(flat))];
  if (body.length > 0) out.push(rule("├", "┼", "┤"));
  for (const row of body) out.push(line(row));
  out.push(rule("└", "┴", "┘"));
  return out.join("\n");
}
