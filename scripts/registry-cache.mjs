// Pinned packages from the npm registry (Node 24, the published OpenClaw), each installed once into a
// cache directory outside the checkout and reused by later runs: the CI budget cannot afford the
// downloads every time, `npm ci` would delete them from node_modules, and a fresh clone must not
// carry them.
//
// Cache: $CONTEXTD_CACHE, else ~/.cache/contextd. It may live outside the checkout because no run
// depends on what is there: nothing in it refers to a checkout (self-contained npm installs), each
// directory is named for its pinned version, each is checked before use (the caller's `valid`, e.g.
// the binary reports its version) and installed again when stale, damaged or missing. An install goes
// into a temporary directory renamed into place only when complete, under a lock directory, so
// parallel test files, CI steps and an interrupted run never see half an install.
//
// Used by scripts/node24.mjs (CI's Node 24) and test/openclaw/helpers/openclaw-install.ts.
import { execFile } from "node:child_process";
import { mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export function cacheDir() {
  return process.env.CONTEXTD_CACHE || path.join(homedir(), ".cache", "contextd");
}

/**
 * Makes `dir` (under cacheDir()) hold `npm install <spec>` unless `valid()` already says it does.
 * `PATH` is the one npm runs with (the node on it runs the package's install scripts).
 */
export async function installOnce({ dir, spec, valid, PATH = process.env.PATH ?? "" }) {
  if (valid()) return;
  const root = path.dirname(dir);
  mkdirSync(root, { recursive: true });
  const lock = path.join(root, `${path.basename(dir)}.lock`);
  await acquire(lock);
  try {
    if (valid()) return;
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", tmp, spec], {
        env: { ...process.env, PATH },
        timeout: 600_000,
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw new Error(`installing ${spec} from the npm registry failed: ${err.stderr?.trim() || err.message}`);
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    if (!valid()) throw new Error(`${spec} installed into ${dir} does not pass its check`);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** A lock directory; a lock older than 15 minutes belongs to a run that died and is taken over. */
async function acquire(lock) {
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
