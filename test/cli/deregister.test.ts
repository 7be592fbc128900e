import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";
import { run, tableRows } from "./run-contextctl.js";

/**
 * `contextctl deregister ID` (the built CLI as a child process) against a real contextd that
 * requires auth, with real Python engines (they register once and do not heartbeat, so a
 * deregistered one stays gone).
 */
describe("contextctl deregister against a contextd that requires auth", () => {
  let contextd: ContextdProcess;
  const engines: EngineProcess[] = [];
  const ctl = (args: string[], env: Record<string, string> = {}) => run(["--address", contextd.address, ...args], env);
  const listed = async () => tableRows((await ctl(["engines"], { CONTEXTD_ADMIN_TOKEN: "a" })).stdout).map((r) => r[0]);

  beforeAll(async () => {
    const auth = {
      required: true,
      owners: { team: { token_env: "OWNER" }, other: { token_env: "OTHER" } },
      operators: [{ token_env: "ADMIN" }],
      runtimes: [{ token_env: "RT" }],
    };
    contextd = await startContextd({ config: { auth }, env: { ADMIN: "a", RT: "r", OWNER: "o", OTHER: "x" } });
    for (const engineId of ["py-1", "py-2", "py-3"]) {
      const engine = await startPythonEngine({ engineId, registry: contextd.address, owner: "team", ownerToken: "o" });
      engines.push(engine);
      expect(await engine.registered).toMatchObject({ ok: true });
    }
  });
  afterAll(async () => {
    for (const e of engines) await e.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("refuses legacy, unknown ids, no credential, a runtime token and another owner's token; nothing is removed", async () => {
    const legacy = await ctl(["deregister", "legacy"], { CONTEXTD_ADMIN_TOKEN: "a" });
    expect(legacy).toMatchObject({ code: 1, stdout: "", stderr: 'contextctl: FAILED_PRECONDITION: "legacy" is built in and cannot be deregistered\n' });
    const unknown = await ctl(["deregister", "no-such-engine"], { CONTEXTD_ADMIN_TOKEN: "a" });
    expect(unknown).toMatchObject({ code: 1, stdout: "", stderr: 'contextctl: NOT_FOUND: engine_id "no-such-engine" is not registered\n' });
    const anonymous = await ctl(["deregister", "py-1"]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toMatch(/^contextctl: UNAUTHENTICATED: .+\n$/);
    // A runtime token in the environment is not sent (it may not deregister); on the command line it is refused.
    expect((await ctl(["deregister", "py-1"], { CONTEXTD_RUNTIME_TOKEN: "r" })).stderr).toMatch(/^contextctl: UNAUTHENTICATED: /);
    const runtime = await ctl(["--token", "r", "deregister", "py-1"]);
    expect(runtime.code).toBe(1);
    expect(runtime.stderr).toMatch(/^contextctl: PERMISSION_DENIED: .+\n$/);
    const otherOwner = await ctl(["deregister", "py-1"], { CONTEXTD_OWNER_TOKEN: "x" });
    expect(otherOwner.code).toBe(1);
    expect(otherOwner.stderr).toMatch(/^contextctl: PERMISSION_DENIED: .+\n$/);
    expect(await listed()).toEqual(expect.arrayContaining(["legacy", "py-1", "py-2", "py-3"]));
  });

  it("the owner's token ($CONTEXTD_OWNER_TOKEN) deregisters its engine", async () => {
    const r = await ctl(["deregister", "py-1"], { CONTEXTD_OWNER_TOKEN: "o" });
    expect(r).toMatchObject({ code: 0, stderr: "", stdout: "deregistered py-1\n" });
    expect(await listed()).not.toContain("py-1");
    const again = await ctl(["deregister", "py-1"], { CONTEXTD_OWNER_TOKEN: "o" });
    expect(again).toMatchObject({ code: 1, stderr: 'contextctl: NOT_FOUND: engine_id "py-1" is not registered\n' });
  });

  it("an operator's token deregisters any engine; $CONTEXTD_ADMIN_TOKEN is preferred over $CONTEXTD_OWNER_TOKEN; --json", async () => {
    const r = await ctl(["--json", "deregister", "py-2"], { CONTEXTD_ADMIN_TOKEN: "a", CONTEXTD_OWNER_TOKEN: "x" });
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(r.stdout)).toEqual({ engineId: "py-2", deregistered: true });
    const flag = await ctl(["--token", "a", "deregister", "py-3"], { CONTEXTD_OWNER_TOKEN: "x" });
    expect(flag).toMatchObject({ code: 0, stdout: "deregistered py-3\n" });
    expect(await listed()).toEqual(["legacy"]);
  });
});
