// Builds the package into dist/index.js (ESM). contextd, the Agents SDK and zod stay external: they
// are the user's (peer dependencies), so the session and the tools use the user's own copies.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));

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
