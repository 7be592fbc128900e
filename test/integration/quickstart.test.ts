import { spawn, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/contextd-process.js";

const run = promisify(execFile);

/**
 * The README's quick start, as written: `npm start` runs contextd on the checked-in default config
 * (only the port and the data file are moved, through CONTEXTD_* overrides, so tests can run in
 * parallel), and `contextctl health` reports SERVING.
 */
describe("quick start: npm start, then contextctl health", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "contextd-quickstart-"));
  const child = spawn("npm", ["start", "--silent"], {
    cwd: REPO_ROOT,
    env: { ...process.env, CONTEXTD_LISTEN: "127.0.0.1:0", CONTEXTD_STORE: `sqlite:${dataDir}/contextd.db`, CONTEXTD_METRICS_LISTEN: "127.0.0.1:0" },
    detached: true,
  });
  afterAll(() => {
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {
      // already gone
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("logs `contextd listening` and answers SERVING", async () => {
    let output = "";
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no 'contextd listening' within 30 s:\n${output}`)), 30_000);
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        for (const line of output.split("\n")) {
          if (!line.includes('"contextd listening"')) continue;
          clearTimeout(timer);
          resolve(JSON.parse(line).address as string);
        }
      });
      child.on("exit", (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)));
    });
    const health = await run(process.execPath, [path.join(REPO_ROOT, "bin/contextctl.js"), "--address", address, "health"]);
    expect(health.stdout).toContain("SERVING");
  });
});
