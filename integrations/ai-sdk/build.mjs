// Builds the middleware into dist/index.js (ES module). Unlike the OpenClaw plugin nothing is
// bundled in but its own sources: the application has `ai` and contextd's client already (it makes
// the ContextdClient it hands over), and two copies of either would not be the same library.
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
  external: ["ai", "@ai-sdk/*", "contextd", "contextd/*", "zod"],
  logLevel: "warning",
});
