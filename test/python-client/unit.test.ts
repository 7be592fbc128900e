/**
 * Runs the Python package's own unit tests (clients/python/tests/client: request building, session
 * coercion, deadlines, error mapping, message helpers, the build backend) under Debian's
 * /usr/bin/python3, so that `npm test` covers them. No contextd: live.test.ts does that.
 */
import { describe, expect, it } from "vitest";
import { PYTHON_PACKAGE_DIR, requirePythonGrpc, runPython } from "../helpers/python.js";

describe("clients/python unit tests (unittest)", () => {
  it("pass under /usr/bin/python3 -m unittest", async () => {
    requirePythonGrpc();
    const args = ["discover", "-s", "tests/client", "-t", "tests/client", "-v"];
    const run = await runPython(["-m", "unittest"], args, {}, { cwd: PYTHON_PACKAGE_DIR, timeoutMs: 180_000 });
    const output = run.stderr + run.stdout;
    expect(run.code, output).toBe(0);
    const ran = /Ran (\d+) tests?/.exec(output);
    expect(ran, output).not.toBeNull();
    // A discovery that finds nothing also "passes": make sure the suites were there.
    expect(Number(ran![1]), output).toBeGreaterThanOrEqual(50);
    expect(output).toMatch(/^OK/m);
  });
});
