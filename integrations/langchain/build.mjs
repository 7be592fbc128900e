// Builds the middleware into dist/index.js (ES module). Only its own sources (and the logic it
// shares with the other integrations, integrations/shared) are bundled in: LangChain and contextd's
// client are the application's (peer dependencies), and two copies of either would not be the same
// library (a message class of another copy is not a message of the agent's).
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
  external: ["langchain", "langchain/*", "@langchain/*", "contextd", "contextd/*", "zod"],
  logLevel: "warning",
});
