import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage } from "../../src/contract/messages.js";
import { Mode, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";

/** `engines`, `engines watch`, `isolate`, `release`: the built contextctl as a child process, a real contextd, a real Python engine. */
const BIN = resolve(import.meta.dirname, "../../bin/contextctl.js");

function spawnCtl(address: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  const base = { ...process.env };
  // No inherited colour settings: the lines are compared as plain text.
  for (const key of Object.keys(base)) if (key.startsWith("CONTEXTD_") || key === "FORCE_COLOR" || key === "NO_COLOR") delete base[key];
  return spawn(process.execPath, [BIN, "--address", address, ...args], { env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

function contextctl(address: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawnCtl(address, args, env);
    let [stdout, stderr] = ["", ""];
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** A long-running `contextctl engines watch ...`: its stdout lines as they come, and its exit. */
function watcher(address: string, args: string[], env: Record<string, string> = {}) {
  const child = spawnCtl(address, ["engines", "watch", ...args], env);
  const lines: string[] = [];
  let [rest, stderr] = ["", ""];
  const waiters = new Set<() => void>();
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    rest += chunk;
    const parts = rest.split("\n");
    rest = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters) w();
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
  /** The first line (already seen or future) at index >= `from` matching `pred`. */
  const waitFor = (pred: (line: string) => boolean, from = 0, timeoutMs = 15_000): Promise<string> =>
    new Promise((ok, fail) => {
      const check = () => {
        const hit = lines.slice(from).find(pred);
        if (hit === undefined) return;
        waiters.delete(check);
        clearTimeout(timer);
        ok(hit);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        fail(new Error(`no matching watch line within ${timeoutMs} ms; lines:\n${lines.join("\n")}\nstderr: ${stderr}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  return { child, lines, waitFor, exited, stderr: () => stderr };
}

/** Cells of the data rows of a cli-table3 table (rows starting with │, header excluded). */
function tableRows(out: string): string[][] {
  return out
    .split("\n")
    .filter((l) => l.startsWith("│"))
    .slice(1)
    .map((l) =>
      l
        .split("│")
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}

const HEAD = ["id", "owner", "endpoint", "state", "health"];
const row = (out: string, id: string) =>
  tableRows(out)
    .find((r) => r[0] === id)
    ?.slice(0, HEAD.length);

describe("contextctl engines / isolate / release against a real contextd and a Python engine", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let faulty: EngineProcess;

  beforeAll(async () => {
    // The agent `faulty` is served by an engine whose Assemble throws; a long ejection keeps it quarantined while asked.
    const config = { slots: { agents: { faulty: "py-faulty" } }, engines: { quarantine: { base_ejection: "10m", max_ejection: "10m" } } };
    contextd = await startContextd({ config });
    engine = await startPythonEngine({ engineId: "py", registry: contextd.address, owner: "team" });
    faulty = await startPythonEngine({ engineId: "py-faulty", registry: contextd.address, owner: "team", control: { assemble: "throw" } });
    expect(await engine.registered).toMatchObject({ ok: true });
    expect(await faulty.registered).toMatchObject({ ok: true });
  });
  afterAll(async () => {
    await engine?.stop().catch(() => undefined);
    await faulty?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("engines lists legacy and the Python engine SERVING", async () => {
    const run = await contextctl(contextd.address, ["engines"]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(
      run.stdout
        .split("\n")[1]
        .split("│")
        .slice(1, -1)
        .map((c) => c.trim()),
    ).toEqual([...HEAD, "calls", "failures", "fallbacks", "timeouts", "fell back because"]);
    expect(row(run.stdout, "legacy")).toEqual(["legacy", "core", "(in process)", "active", "SERVING"]);
    expect(row(run.stdout, "py")).toEqual(["py", "team", engine.address, "active", "SERVING"]);
  });

  it("isolate py --reason maint quarantines it by hand; release py clears it", async () => {
    const isolate = await contextctl(contextd.address, ["isolate", "py", "--reason", "maint"]);
    expect(isolate).toMatchObject({ code: 0, stderr: "" });
    expect(isolate.stdout).toMatch(/^engine\s+py$/m);
    expect(isolate.stdout).toMatch(/^quarantine\s+manual: maint$/m);
    expect(isolate.stdout).toMatch(/^release\s+held until `contextctl release py`$/m);
    // Its health checks still pass: the state column says it is not routed to.
    expect(row((await contextctl(contextd.address, ["engines"])).stdout, "py")).toEqual([
      "py",
      "team",
      engine.address,
      "quarantined (manual: maint)",
      "SERVING",
    ]);
    const json = JSON.parse((await contextctl(contextd.address, ["--json", "engines"])).stdout);
    const py = json.engines.find((e: { engineId: string }) => e.engineId === "py");
    expect(py.quarantine).toMatchObject({ operation: "manual", reason: "maint", manual: true });

    const release = await contextctl(contextd.address, ["release", "py"]);
    expect(release).toMatchObject({ code: 0, stderr: "", stdout: "py owner=team health=SERVING quarantine=none\n" });
    expect(row((await contextctl(contextd.address, ["engines"])).stdout, "py")?.[3]).toBe("active");

    // --json: the EngineStatus after the change, as ListEngines reports it.
    const isolated = JSON.parse((await contextctl(contextd.address, ["--json", "isolate", "py", "--reason", "json"])).stdout);
    expect(isolated.engine).toMatchObject({ engineId: "py", owner: "team", quarantine: { manual: true, reason: "json" } });
    const released = JSON.parse((await contextctl(contextd.address, ["--json", "release", "py"])).stdout);
    expect(released.engine).toMatchObject({ engineId: "py", owner: "team" });
    expect(released.engine.quarantine).toBeUndefined();
  });

  it("an engine quarantined by a failure shows until when, and why, while its health checks pass", async () => {
    const cx = new ContextdClient({ address: contextd.address });
    try {
      const session = { sessionId: "faulty-1", agentId: "faulty" };
      await cx.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, "hello")] });
      const res = await cx.assemble({ session, tokenBudget: 4000 });
      expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    } finally {
      cx.close();
    }
    const json = JSON.parse((await contextctl(contextd.address, ["--json", "engines"])).stdout);
    const record = json.engines.find((e: { engineId: string }) => e.engineId === "py-faulty").quarantine;
    expect(record).toMatchObject({ operation: "assemble", reason: expect.stringContaining("told to throw") });
    expect(record.manual).toBeUndefined(); // proto JSON leaves false out
    const releaseAt = Number(record.releaseAtMs);
    expect(releaseAt).toBeGreaterThan(Date.now());
    const run = await contextctl(contextd.address, ["engines"], { TZ: "UTC" });
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const until = new Date(releaseAt).toISOString().slice(11, 19);
    expect(row(run.stdout, "py-faulty")).toEqual(["py-faulty", "team", faulty.address, `quarantined until ${until} (assemble: ${record.reason})`, "SERVING"]);
    // The failed Assemble fell back on an error: counted, and said why, in the last columns.
    const cells = tableRows(run.stdout).find((r) => r[0] === "py-faulty")!;
    expect(cells.slice(-3)).toEqual(["1", "0", "error 1"]);
    expect((await contextctl(contextd.address, ["release", "py-faulty"])).code).toBe(0);
    expect(row((await contextctl(contextd.address, ["engines"])).stdout, "py-faulty")?.[3]).toBe("active");
  });

  it("engines watch prints QUARANTINED and RELEASED as they happen and exits 0 on SIGINT", async () => {
    const json = watcher(contextd.address, ["--json", "--current"]);
    const text = watcher(contextd.address, ["--current"]);
    try {
      await json.waitFor((l) => JSON.parse(l).engine?.engineId === "py"); // the current engines: subscribed
      await text.waitFor((l) => / REGISTERED py /.test(l));
      const from = json.lines.length;
      expect((await contextctl(contextd.address, ["isolate", "py", "--reason", "watch me"])).code).toBe(0);
      const quarantined = JSON.parse(await json.waitFor((l) => JSON.parse(l).type === "ENGINE_EVENT_TYPE_QUARANTINED", from));
      expect(quarantined).toMatchObject({ engine: { engineId: "py", owner: "team", quarantine: { reason: "watch me", manual: true } } });
      expect(new Date(quarantined.atMs).getTime()).toBeGreaterThan(Date.now() - 60_000);
      expect((await contextctl(contextd.address, ["release", "py"])).code).toBe(0);
      const released = JSON.parse(await json.waitFor((l) => JSON.parse(l).type === "ENGINE_EVENT_TYPE_RELEASED", from));
      expect(released.engine).toMatchObject({ engineId: "py" });
      expect(released.engine.quarantine).toBeUndefined();

      const iso = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";
      expect(await text.waitFor((l) => l.includes(" QUARANTINED "))).toMatch(
        new RegExp(`^${iso} QUARANTINED py owner=team health=SERVING quarantine="manual: watch me" message="manual: watch me" instance=127\\.0\\.0\\.1:\\d+$`),
      );
      expect(await text.waitFor((l) => l.includes(" RELEASED "))).toMatch(new RegExp(`^${iso} RELEASED py owner=team health=SERVING quarantine=none message=`));
    } finally {
      json.child.kill("SIGINT");
      text.child.kill("SIGINT");
    }
    expect(await json.exited).toBe(0);
    expect(await text.exited).toBe(0);
    expect(json.stderr() + text.stderr()).toBe("");
  });

  it("isolate legacy fails with FAILED_PRECONDITION; an unknown id with NOT_FOUND", async () => {
    const legacy = await contextctl(contextd.address, ["isolate", "legacy"]);
    expect(legacy.code).toBe(1);
    expect(legacy.stdout).toBe("");
    expect(legacy.stderr).toMatch(/^contextctl: FAILED_PRECONDITION: .+\n$/);
    const unknown = await contextctl(contextd.address, ["release", "no-such-engine"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^contextctl: NOT_FOUND: .+\n$/);
  });
});

describe("contextctl operator commands against a contextd that requires auth", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;

  beforeAll(async () => {
    const auth = { required: true, owners: { team: { token_env: "OWNER" } }, operators: [{ token_env: "ADMIN" }], runtimes: [{ token_env: "RT" }] };
    contextd = await startContextd({ config: { auth }, env: { ADMIN: "a", RT: "r", OWNER: "o" } });
    engine = await startPythonEngine({ engineId: "py", registry: contextd.address, owner: "team", ownerToken: "o" });
    expect(await engine.registered).toMatchObject({ ok: true });
  });
  afterAll(async () => {
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("isolate with the runtime token is PERMISSION_DENIED; with the admin token it works", async () => {
    const runtime = await contextctl(contextd.address, ["--token", "r", "isolate", "py"]);
    expect(runtime.code).toBe(1);
    expect(runtime.stderr).toMatch(/^contextctl: PERMISSION_DENIED: .+\n$/);
    const admin = await contextctl(contextd.address, ["--token", "a", "isolate", "py", "--reason", "maint"]);
    expect(admin).toMatchObject({ code: 0, stderr: "" });
    expect(admin.stdout).toMatch(/^quarantine\s+manual: maint$/m);
    const released = await contextctl(contextd.address, ["--token", "a", "release", "py"]);
    expect(released).toMatchObject({ code: 0, stdout: "py owner=team health=SERVING quarantine=none\n" });
  });

  it("without --token, isolate takes $CONTEXTD_ADMIN_TOKEN over $CONTEXTD_RUNTIME_TOKEN; engines reads with either", async () => {
    const both = { CONTEXTD_ADMIN_TOKEN: "a", CONTEXTD_RUNTIME_TOKEN: "r" };
    expect((await contextctl(contextd.address, ["isolate", "py"], both)).code).toBe(0);
    expect((await contextctl(contextd.address, ["release", "py"], { CONTEXTD_RUNTIME_TOKEN: "r" })).stderr).toMatch(/^contextctl: PERMISSION_DENIED: /);
    expect((await contextctl(contextd.address, ["release", "py"], { CONTEXTD_ADMIN_TOKEN: "a" })).code).toBe(0);
    expect((await contextctl(contextd.address, ["engines"], { CONTEXTD_ADMIN_TOKEN: "a" })).code).toBe(0);
  });

  it("engines watch without a token ends with UNAUTHENTICATED, exit 1", async () => {
    const watch = watcher(contextd.address, []);
    expect(await watch.exited).toBe(1);
    expect(watch.stderr()).toMatch(/^contextctl: UNAUTHENTICATED: .+\n$/);
    expect(watch.lines).toEqual([]);
  });
});
