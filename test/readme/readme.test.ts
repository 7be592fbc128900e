/**
 * The README works as written (issue 13): every command block of its "Quick start" and "Use it from
 * a runtime", then of "Write your own engine" in docs/engines.md (where the README sends a reader
 * next), is run verbatim, in order, as a reader at a terminal would —
 * `npm start` in the background, then `contextctl`, the TypeScript client from a project of its own,
 * the Python client from the checkout and installed into a virtualenv, and the Python engine serving
 * a replayed conversation. How each block is run is said by an HTML comment before it
 * (test/readme/readme-blocks.ts).
 *
 * Where: a scratch checkout (a directory of symlinks to this one's files, with its own `data/`) inside
 * a network namespace with only its own loopback, so the README's fixed port 50051 collides with
 * nothing and nothing is reached outside. What is not literal: `npm ci` is taken as done — the test
 * suite itself runs after it (.ci/run: `npm ci`, then `npm test`), and reinstalling node_modules under
 * running tests would break them — so `npm ci` checks that it has run instead; and the block that is
 * `npm ci && npm test` (CI itself) is not run.
 */
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/contextd-process.js";
import { createLoopbackNamespace, type LoopbackNamespace } from "./loopback-namespace.js";
import { readmeBlocks, type ReadmeBlock } from "./readme-blocks.js";

/** The Markdown files and the sections of each that are run, in the order a reader follows them. */
const SOURCES: Array<[string, string[]]> = [
  ["README.md", ["Quick start", "Use it from a runtime"]],
  ["docs/engines.md", ["Write your own engine"]],
  // Where the Python section sends an asyncio runtime: AsyncClient, and an engine of `async def` methods.
  ["clients/python/README.md", ["On asyncio", "An async engine"]],
];
const blocks = SOURCES.flatMap(([file, scopes]) => readmeBlocks(path.join(REPO_ROOT, file), scopes));
/** Where a block is, for messages: `docs/engines.md line 120`. */
const at = (b: ReadmeBlock) => `${path.relative(REPO_ROOT, b.source)} line ${b.line}`;
/** Entries of this checkout the scratch one does not link: state a run of the README creates. */
const NOT_LINKED = new Set([".git", "data", ".venv", "chat.mjs", "chat.py", "newest_first.py", "async_chat.py", "async_engine.py"]);

// Instead of reinstalling: npm ci has run when its hidden lockfile is at least as new as the lockfile.
const PRELUDE = `set -e
npm() {
  if [ "\${1-}" = ci ]; then
    if [ -f node_modules/.package-lock.json ] && [ ! package-lock.json -nt node_modules/.package-lock.json ]; then return 0; fi
    echo "readme-test: npm ci has not run in $(pwd)" >&2; return 1
  fi
  command npm "$@"
}
`;

interface Background {
  block: ReadmeBlock;
  child: ChildProcess;
  output: () => string;
  /** Resolves at the next output (or exit). */
  changed: () => Promise<void>;
  exited: Promise<void>;
}

describe("the README, run as written", () => {
  let scratch = "";
  let checkout = "";
  let ns: LoopbackNamespace;
  let cwd = "";
  let heading = "";
  const background: Background[] = [];
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CONTEXTD_") && !k.startsWith("VITEST")));
  Object.assign(env, { npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false", PIP_DISABLE_PIP_VERSION_CHECK: "1" });
  delete env.NODE_ENV;

  beforeAll(() => {
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-readme-"));
    // Named as a clone would be: the README installs the client from `../contextd`.
    checkout = path.join(scratch, "contextd");
    fs.mkdirSync(checkout);
    for (const entry of fs.readdirSync(REPO_ROOT)) {
      if (!NOT_LINKED.has(entry)) fs.symlinkSync(path.join(REPO_ROOT, entry), path.join(checkout, entry));
    }
    ns = createLoopbackNamespace();
  });

  afterAll(async () => {
    await Promise.all(background.map(stop));
    ns?.destroy();
    fs.rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  it("has the blocks this test knows how to run, and skips only CI itself", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(10);
    for (const b of blocks) {
      if (b.lang !== "sh" && !b.file && b.skip === undefined) throw new Error(`${at(b)}: a ${b.lang} block needs a readme-test file or skip directive`);
    }
    const skipped = blocks.filter((b) => b.skip !== undefined).map((b) => b.text.trim().split("\n")[0]);
    expect(skipped).toContain("npm ci && npm test         # builds, type-checks, and runs every test (real processes, real sockets)");
    expect(blocks.filter((b) => b.skip === undefined && b.lang === "sh").length).toBeGreaterThanOrEqual(7);
  });

  it("the TypeScript engine it shows is engines/newest-first/main.ts (which test/unit/sdk/engine-sdk.test.ts runs)", () => {
    const ts = blocks.find((b) => b.lang === "ts" && b.text.includes("serveEngine({"));
    expect(ts, "the TypeScript engine block of docs/engines.md").toBeDefined();
    const main = fs.readFileSync(path.join(REPO_ROOT, "engines/newest-first/main.ts"), "utf8");
    // The object literal: `await serveEngine({ … });` in the docs, `export const newestFirst … = { … };` in main.ts.
    const literal = (text: string, opener: string, closer: string) => text.slice(text.indexOf(opener) + opener.length, text.indexOf(closer));
    expect(literal(ts!.text, "await serveEngine({", "\n});")).toBe(
      literal(main, "export const newestFirst: EngineDefinition = {", "\n};").replace('process.env.ENGINE_ID ?? "newest-first"', '"newest-first"'),
    );
  });

  for (const block of blocks) {
    const title = `${at(block)} (${block.heading}): ${block.file ? `file ${block.file}` : block.text.trim().split("\n")[0].slice(0, 70)}`;
    const run = block.skip !== undefined ? it.skip : it;
    run(
      title,
      async () => {
        if (block.heading !== heading) {
          heading = block.heading;
          cwd = checkout; // every section starts from the checkout, as the README's prose does
        }
        if (block.file) {
          fs.writeFileSync(path.join(cwd, block.file), block.text);
          return;
        }
        if (block.background) {
          const replaced = block.background.replaces;
          if (replaced) {
            const old = background.filter((b) => b.block.text.includes(replaced));
            expect(old.length, `nothing running replaces "${replaced}"`).toBeGreaterThan(0);
            await Promise.all(old.map(stop));
          }
          const started = startBackground(block);
          background.push(started);
          await waitFor(started, block.background.readyAt, 120_000);
          return;
        }
        const deadline = Date.now() + (block.retry?.ms ?? 0);
        for (;;) {
          const result = await runForeground(block.text);
          if (process.env.README_TEST_VERBOSE) console.log(`${at(block)} (exit ${result.code}):\n${result.output}`);
          const matches = !block.retry || block.retry.until.test(result.output);
          if ((result.code === 0 && matches) || Date.now() > deadline) {
            expect(result.code, `exit code of ${at(block)}; output:\n${result.output}`).toBe(0);
            if (block.retry) expect(result.output).toMatch(block.retry.until);
            if (block.expect) expect(result.output).toMatch(block.expect);
            cwd = result.cwd;
            return;
          }
          await new Promise((r) => setTimeout(r, 1000)); // a retry directive: poll as the reader would
        }
      },
      240_000,
    );
  }

  function runForeground(text: string): Promise<{ code: number | null; output: string; cwd: string }> {
    const cwdFile = path.join(scratch, "cwd");
    const script = `${PRELUDE}trap 'pwd > "${cwdFile}"' EXIT\n${text}`;
    const child = ns.bash(script, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    return new Promise((resolve) =>
      child.once("close", (code) => resolve({ code, output, cwd: fs.existsSync(cwdFile) ? fs.readFileSync(cwdFile, "utf8").trim() : cwd })),
    );
  }

  function startBackground(block: ReadmeBlock): Background {
    const child = ns.bash(`${PRELUDE}${block.text}`, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    let waiters: (() => void)[] = [];
    const wake = () => {
      for (const w of waiters) w();
      waiters = [];
    };
    const append = (c: Buffer) => {
      output += c.toString();
      wake();
    };
    child.stdout!.on("data", append);
    child.stderr!.on("data", append);
    const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
    void exited.then(wake);
    return { block, child, output: () => output, changed: () => new Promise((r) => waiters.push(r)), exited };
  }
});

async function waitFor(bg: Background, text: string, timeoutMs: number): Promise<void> {
  let exited = false;
  void bg.exited.then(() => (exited = true));
  const until = Date.now() + timeoutMs;
  while (!bg.output().includes(text)) {
    if (exited) throw new Error(`${at(bg.block)} exited before printing "${text}":\n${bg.output()}`);
    if (Date.now() > until) throw new Error(`${at(bg.block)} did not print "${text}" within ${timeoutMs} ms:\n${bg.output()}`);
    await Promise.race([bg.changed(), new Promise((r) => setTimeout(r, until - Date.now()))]);
  }
}

/** SIGTERM to the block's process group (bash, npm, contextd and its sidecars), SIGKILL after 15 s. */
async function stop(bg: Background): Promise<void> {
  const group = -bg.child.pid!;
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(group, s);
    } catch {
      // gone
    }
  };
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), 15_000);
  await bg.exited;
  clearTimeout(timer);
}
