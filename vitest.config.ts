import { defineConfig } from "vitest/config";

// Integration tests start real contextd processes and real engine sidecars; they need generous
// timeouts on a shared 2-core machine, and each file runs in its own fork so a crashing child
// cannot take the runner down.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts", "engines/**/*.test.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});
