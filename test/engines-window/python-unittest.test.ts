/**
 * Runs the window engine's own Python unit tests (engines/window/tests: the window selection, the
 * services over in-process gRPC, the registrar against a fake registry) with Debian's
 * /usr/bin/python3, so that `npm test` covers them.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, REPO_ROOT } from "../helpers/python.js";

function run(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, PYTHONDONTWRITEBYTECODE: "1", PYTHONUNBUFFERED: "1" };
    delete env.PYTHONHOME;
    delete env.PYTHONPATH;
    const child = spawn(cmd, args, { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (output += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (output += c));
    const timer = setTimeout(() => {
      output += `\n[python-unittest] killed after ${timeoutMs} ms`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe("engines/window Python unit tests", () => {
  it("pass under /usr/bin/python3 -m unittest", async () => {
    const { code, output } = await run(
      PYTHON,
      ["-m", "unittest", "discover", "-s", "engines/window/tests", "-t", "engines/window", "-v"],
      110_000,
    );
    const ran = /^Ran (\d+) tests? in /m.exec(output);
    expect(ran, `no "Ran N tests" line in the output:\n${output}`).not.toBeNull();
    expect(Number(ran![1])).toBeGreaterThan(0);
    expect(code, output).toBe(0);
    expect(output).toMatch(/^OK\b/m);
  });
});
