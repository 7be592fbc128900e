// Builds the plugin into one self-contained file, dist/index.js: OpenClaw copies a plugin's
// package directory before loading it, so the plugin cannot reach contextd's client or grpc-js
// through node_modules links outside it. Only `openclaw/*` stays external (OpenClaw resolves it).
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");

await build({
  entryPoints: [path.join(here, "src/index.ts")],
  outfile: path.join(here, "dist/index.js"),
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  sourcemap: true,
  external: ["openclaw", "openclaw/*"],
  // The plugin imports contextd's public subpaths; in this repository they are its sources.
  alias: {
    "contextd/client": path.join(repo, "src/sdk/runtime-client.ts"),
    "contextd/openclaw": path.join(repo, "src/openclaw/index.ts"),
    "contextd/tools": path.join(repo, "src/sdk/history-tools.ts"),
  },
  logLevel: "warning",
});
