/**
 * Runs the Python unit tests of the recall engine (engines/recall/tests: the prompt's FTS5 query,
 * the SQLite index on a real temp file, the budgeted selection, the engine over in-process gRPC,
 * main.py's configuration errors) with Debian's /usr/bin/python3, so that `npm test` covers them.
 * A machine without Python's grpc FAILS them (requirePythonGrpc) instead of skipping.
 */
import { describe, expect, it } from "vitest";
import { requirePythonGrpc, runPython } from "../helpers/python.js";

describe("Python unit tests (unittest, /usr/bin/python3)", () => {
  // Without PYTHONPATH: the tests (like main.py) find clients/python by themselves.
  it("engines/recall", async () => {
    requirePythonGrpc();
    const run = await runPython(
      ["-m", "unittest"],
      ["discover", "-s", "engines/recall/tests", "-t", "engines/recall", "-v"],
      {},
      { timeoutMs: 150_000, withPackage: false },
    );
    const output = run.stderr + run.stdout;
    const ran = /^Ran (\d+) tests? in /m.exec(output);
    expect(ran, `no "Ran N tests" line in the output:\n${output}`).not.toBeNull();
    // A discovery that finds nothing also "passes": make sure the suites were there.
    expect(Number(ran![1]), output).toBeGreaterThanOrEqual(40);
    expect(run.code, output).toBe(0);
    expect(output).toMatch(/^OK\b/m);
  }, 160_000);
});
