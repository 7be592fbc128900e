import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// `npm run test:compose` only: the docker-compose stack, built and run on a Docker daemon
// (test/compose/compose-stack.e2e.ts). The file name does not match the main config's
// `*.test.ts`, so `npm test` never runs it. One file, one fork, and timeouts long enough for a cold
// build of every image on a 2-core machine.
export default defineConfig({
  root: fileURLToPath(new URL("../..", import.meta.url)),
  test: {
    include: ["test/compose/**/*.e2e.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 20 * 60_000,
    hookTimeout: 10 * 60_000,
  },
});
