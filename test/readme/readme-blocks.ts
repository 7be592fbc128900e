/**
 * The runnable blocks of the README (and of the docs pages it sends a reader to), read from the
 * Markdown itself so that the test runs what a reader copies. A fenced block may be preceded by one
 * HTML comment that says how it is run (invisible when the Markdown is rendered):
 *
 *   <!-- readme-test: file chat.py -->                            write the block to ./chat.py
 *   <!-- readme-test: background, ready at "contextd listening" --> start it, wait for that output
 *   <!-- readme-test: background, replaces "npm start", ready at "…" --> stop that one first
 *   <!-- readme-test: expect "^legacy MODE_NORMAL \d+ 1$" -->     its output must match (multiline)
 *   <!-- readme-test: retry 60s until "window .*SERVING" -->      run again until the output matches
 *   <!-- readme-test: skip, <why> -->                             not run (the test lists these)
 *
 * A `sh` block without a comment is run and must exit 0; any other block needs `file` or `skip`,
 * so a block added to a tested section cannot go untested unnoticed.
 */
import fs from "node:fs";

export interface ReadmeBlock {
  /** The Markdown file, as given to readmeBlocks. */
  source: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The `##`/`###` heading the block is under: a new heading starts from the checkout again. */
  heading: string;
  lang: string;
  text: string;
  file?: string;
  background?: { readyAt: string; replaces?: string };
  expect?: RegExp;
  retry?: { ms: number; until: RegExp };
  skip?: string;
}

const DIRECTIVE = /^<!--\s*readme-test:\s*(.*?)\s*-->$/;

/** Blocks under the headings in `scopes` (each scope ends at the next heading of its level or higher). */
export function readmeBlocks(readmePath: string, scopes: string[]): ReadmeBlock[] {
  const lines = fs.readFileSync(readmePath, "utf8").split("\n");
  const blocks: ReadmeBlock[] = [];
  let scopeLevel = 0;
  let heading = "";
  let directive: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const h = /^(#{2,4}) (.*)$/.exec(line);
    if (h) {
      const level = h[1].length;
      if (scopes.includes(h[2])) scopeLevel = level;
      else if (scopeLevel && level <= scopeLevel) scopeLevel = 0;
      if (scopeLevel) heading = h[2];
      directive = undefined;
      continue;
    }
    if (!scopeLevel) continue;
    const d = DIRECTIVE.exec(line.trim());
    if (d) {
      directive = d[1];
      continue;
    }
    const fence = /^```(\w*)\s*$/.exec(line);
    if (!fence) {
      if (line.trim()) directive = undefined; // a directive applies to the very next block only
      continue;
    }
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]); i++) body.push(lines[i]);
    blocks.push({
      source: readmePath,
      line: start + 1,
      heading,
      lang: fence[1],
      text: body.join("\n") + "\n",
      ...parseDirective(directive, `${readmePath} line ${start + 1}`),
    });
    directive = undefined;
  }
  return blocks;
}

function parseDirective(directive: string | undefined, where: string): Partial<ReadmeBlock> {
  if (directive === undefined) return {};
  const quoted = (key: string) => new RegExp(`${key} "((?:[^"\\\\]|\\\\.)*)"`).exec(directive)?.[1];
  if (directive.startsWith("skip")) return { skip: directive.replace(/^skip,?\s*/, "") || "no reason given" };
  if (directive.startsWith("file ")) return { file: directive.slice(5).trim() };
  if (directive.startsWith("background")) {
    const readyAt = quoted("ready at");
    if (!readyAt) throw new Error(`${where}: a background block needs ready at "…"`);
    return { background: { readyAt, replaces: quoted("replaces") } };
  }
  if (directive.startsWith("expect ")) return { expect: new RegExp(quoted("expect")!, "m") };
  const retry = /^retry (\d+)s until "(.*)"$/.exec(directive);
  if (retry) return { retry: { ms: Number(retry[1]) * 1000, until: new RegExp(retry[2], "m") } };
  throw new Error(`${where}: unknown readme-test directive ${JSON.stringify(directive)}`);
}
