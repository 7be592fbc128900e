/**
 * The published `openclaw` package (pinned) and the Node.js 24 it needs, installed once from the npm
 * registry into the cache of scripts/registry-cache.mjs (~/.cache/contextd, or $CONTEXTD_CACHE) and
 * reused by every later run: the CI budget cannot afford ~30 s of installs per test file, and a fresh
 * clone must not carry 650 MB. Each install is checked before use — Node must report its version,
 * OpenClaw's package.json must name its own and its CLI must run — and installed again otherwise.
 * Node 24 is the one scripts/node24.mjs installs, which CI also runs the whole suite on.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { ensureNode24 } from "../../../scripts/node24.mjs";
import { cacheDir, installOnce } from "../../../scripts/registry-cache.mjs";

export { cacheDir };
export const OPENCLAW_VERSION = "2026.9.6";

export interface OpenClawInstall {
  /** The Node 24 binary. */
  node: string;
  /** OpenClaw's CLI entry (run it with `node`). */
  cli: string;
  /** The installed package's root (node_modules/openclaw). */
  packageDir: string;
}

export async function ensureOpenClaw(): Promise<OpenClawInstall> {
  const { node } = await ensureNode24();
  const ocDir = path.join(cacheDir(), `openclaw-${OPENCLAW_VERSION}`);
  const packageDir = path.join(ocDir, "node_modules/openclaw");
  const cli = path.join(packageDir, "openclaw.mjs");
  await installOnce({
    dir: ocDir,
    spec: `openclaw@${OPENCLAW_VERSION}`,
    valid: () => versionOf(path.join(packageDir, "package.json")) === OPENCLAW_VERSION && cliRuns(node, cli),
    // OpenClaw's install scripts run under the Node 24 it needs.
    PATH: `${path.dirname(node)}:${process.env.PATH ?? ""}`,
  });
  return { node, cli, packageDir };
}

/** Whether `node <cli> --version` runs and names the pinned version. */
function cliRuns(node: string, cli: string): boolean {
  try {
    const out = execFileSync(node, [cli, "--version"], { encoding: "utf8", timeout: 60_000, env: { PATH: process.env.PATH ?? "" } });
    return out.includes(OPENCLAW_VERSION);
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
