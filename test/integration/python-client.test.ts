import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { lastJsonLine, requirePythonGrpc, runPython } from "../helpers/python.js";

/** The contract outside TypeScript: Debian's python3-grpcio with the repository's `contextd` package. */
describe("a Python runtime client (contextd.Client from clients/python)", () => {
  let contextd: ContextdProcess;

  beforeAll(async () => {
    requirePythonGrpc();
    contextd = await startContextd({
      config: { auth: { required: true, runtimes: [{ token_env: "PY_RUNTIME_TOKEN" }] } },
      env: { PY_RUNTIME_TOKEN: "py-secret" },
    });
  });
  afterAll(async () => {
    await contextd?.cleanup();
  });

  it("appends, assembles within budget, compacts and reads the whole transcript back", async () => {
    const run = await runPython("test/python/client_smoke.py", [contextd.address, "python-session"], { CONTEXTD_RUNTIME_TOKEN: "py-secret" });
    expect(run.code, run.stderr + run.stdout).toBe(0);
    const result = lastJsonLine(run.stdout)!;
    expect(result.engine_id).toBe("legacy");
    expect(result.assemble_mode).toBe("MODE_NORMAL");
    expect(result.assembled_tokens as number).toBeLessThanOrEqual(8000);
    expect(result.compacted).toBe(true);
    expect(result.transcript_messages).toBe(result.appended);
  });
});
