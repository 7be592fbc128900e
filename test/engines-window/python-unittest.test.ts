/**
 * Runs the Python unit tests of the window engine (engines/window/tests: the window selection, the
 * engine over in-process gRPC, main.py's configuration errors) and of the engine SDK it is built on
 * (clients/python/tests/engine: definition, servicer, host client, registration, options, real
 * processes) with Debian's /usr/bin/python3, so that `npm test` covers them. A machine without
 * Python's grpc FAILS them (requirePythonGrpc) instead of skipping.
 */
import { describe, expect, it } from "vitest";
import { requirePythonGrpc, runPython } from "../helpers/python.js";

async function unittest(start: string, top: string, minimum: number, withPackage: boolean): Promise<void> {
  requirePythonGrpc();
  const run = await runPython(["-m", "unittest"], ["discover", "-s", start, "-t", top, "-v"], {}, { timeoutMs: 150_000, withPackage });
  const output = run.stderr + run.stdout;
  const ran = /^Ran (\d+) tests? in /m.exec(output);
  expect(ran, `no "Ran N tests" line in the output:\n${output}`).not.toBeNull();
  // A discovery that finds nothing also "passes": make sure the suites were there.
  expect(Number(ran![1]), output).toBeGreaterThanOrEqual(minimum);
  expect(run.code, output).toBe(0);
  expect(output).toMatch(/^OK\b/m);
}

describe("Python unit tests (unittest, /usr/bin/python3)", () => {
  // Without PYTHONPATH: the tests (like main.py) find clients/python by themselves.
  it("engines/window", () => unittest("engines/window/tests", "engines/window", 30, false), 160_000);
  it("clients/python/tests/engine (the engine SDK)", () => unittest("clients/python/tests/engine", "clients/python", 50, true), 160_000);
});
