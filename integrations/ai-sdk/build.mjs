// Builds the middleware into dist/index.js (ES module). Unlike the OpenClaw plugin nothing is
// bundled in but its own sources: the application has `ai` and contextd's client already (it makes
// the ContextdClient it hands over), and two copies of either would not be the same library.
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
  external: ["ai", "@ai-sdk/*", "contextd", "contextd/*", "zod"],
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
