import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { generatePythonStubs, lastJsonLine, runPython, REPO_ROOT } from "../helpers/python.js";

/** The contract outside TypeScript: Debian's python3-grpcio with stubs generated from proto/ here. */
describe("a Python runtime client (grpcio, stubs generated from proto/)", () => {
  let contextd: ContextdProcess;
  let stubs: string;

  beforeAll(async () => {
    stubs = mkdtempSync(path.join(tmpdir(), "contextd-py-"));
    generatePythonStubs(stubs);
    contextd = await startContextd({
      config: { auth: { required: true, runtimes: [{ token_env: "PY_RUNTIME_TOKEN" }] } },
      env: { PY_RUNTIME_TOKEN: "py-secret" },
    });
  });
  afterAll(async () => {
    await contextd?.cleanup();
    rmSync(stubs, { recursive: true, force: true });
  });

  it("appends, assembles within budget, compacts and reads the whole transcript back", async () => {
    const script = path.join(REPO_ROOT, "test/python/client_smoke.py");
    const run = await runPython(script, [contextd.address, "python-session"], { CONTEXTD_RUNTIME_TOKEN: "py-secret" }, { stubsDir: stubs });
    expect(run.code, run.stderr + run.stdout).toBe(0);
    const result = lastJsonLine(run.stdout)!;
    expect(result.engine_id).toBe("legacy");
    expect(result.assembled_tokens as number).toBeLessThanOrEqual(8000);
    expect(result.compacted).toBe(true);
    expect(result.transcript_messages).toBe(result.appended);
  });
});
