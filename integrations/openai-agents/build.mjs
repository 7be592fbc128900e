// Builds the package into dist/index.js (ESM). contextd, the Agents SDK and zod stay external: they
// are the user's (peer dependencies), so the session and the tools use the user's own copies.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));

fs.rmSync(path.join(here, "dist"), { recursive: true, force: true });

await build({
  entryPoints: [path.join(here, "src/index.ts")],
  outfile: path.join(here, "dist/index.js"),
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  sourcemap: true,
  external: ["contextd", "contextd/*", "@openai/agents", "@openai/agents/*", "zod"],
  logLevel: "warning",
});

// The type declarations, from tsconfig.build.json, into dist/types/ under their paths from
// integrations/ (so a module of integrations/shared that the sources import keeps its relative
// path): dist/types/<package>/src/index.d.ts is what package.json's `types` names. They import
// contextd's public subpaths as written (`contextd/client`, `contextd/tools`), resolved while
// building to contextd's own declarations in ../../dist: build contextd first (`npm run build` at
// the repository root does both, in that order).
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(here, "tsconfig.build.json")], { stdio: "inherit" });
