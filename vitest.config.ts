import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Integration tests start real contextd processes and real engine sidecars; they need generous
// timeouts on a shared 2-core machine, and each file runs in its own fork so a crashing child
// cannot take the runner down.
export default defineConfig({
  resolve: {
    // The OpenClaw plugin (its own package, integrations/openclaw) imports contextd's public
    // subpaths; its bundle resolves them to these sources (integrations/openclaw/build.mjs), so do tests.
    alias: {
      "contextd/client": fileURLToPath(new URL("./src/sdk/runtime-client.ts", import.meta.url)),
      "contextd/openclaw": fileURLToPath(new URL("./src/openclaw/index.ts", import.meta.url)),
    },
  },
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts", "engines/**/*.test.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});
