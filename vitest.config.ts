import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

// Two projects (docs/development.md, "Tests"):
// - unit: test/unit/, mirroring the directories of what it tests. No process, no contextd, no
//   database server, no Python, no docker, no dist/ (so no build): functions and in-process objects,
//   SQLite files in a temp dir, in-process servers on loopback. `npm run test:unit`, in seconds.
// - system: every other test. They start real contextd processes and real engine sidecars; they need
//   generous timeouts on a shared 2-core machine, and each file runs in its own fork so a crashing
//   child cannot take the runner down.
// `npm test` (what CI runs) runs both.
export default defineConfig({
  resolve: {
    // The OpenClaw plugin (its own package, integrations/openclaw) imports contextd's public
    // subpaths; its bundle resolves them to these sources (integrations/openclaw/build.mjs), so do tests.
    // So do the engines under engines/ (the SDK, the summarizer), which the unit tests run in process.
    alias: {
      "contextd/client": fileURLToPath(new URL("./src/sdk/runtime-client.ts", import.meta.url)),
      "contextd/openclaw": fileURLToPath(new URL("./src/openclaw/index.ts", import.meta.url)),
      "contextd/tools": fileURLToPath(new URL("./src/sdk/history-tools.ts", import.meta.url)),
      "contextd/engine-sdk": fileURLToPath(new URL("./src/sdk/engine-sdk.ts", import.meta.url)),
      "contextd/summarizer": fileURLToPath(new URL("./src/compaction/summarizer/extractive.ts", import.meta.url)),
      // The Agents SDK integration (its own package, integrations/openai-agents): tests and its README example run its sources.
      "@contextd/openai-agents": fileURLToPath(new URL("./integrations/openai-agents/src/index.ts", import.meta.url)),
      // The AI SDK integration (its own package, integrations/ai-sdk) is tested from its sources.
      "@contextd/ai-sdk": fileURLToPath(new URL("./integrations/ai-sdk/src/index.ts", import.meta.url)),
      // The LangChain integration (its own package, integrations/langchain) is tested from its sources.
      "@contextd/langchain": fileURLToPath(new URL("./integrations/langchain/src/index.ts", import.meta.url)),
    },
  },
  test: {
    // Both projects inherit these (extends: true).
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/unit/**/*.test.ts"] },
      },
      {
        extends: true,
        test: {
          name: "system",
          include: ["test/**/*.test.ts", "src/**/*.test.ts", "engines/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/unit/**"],
        },
      },
    ],
  },
});
