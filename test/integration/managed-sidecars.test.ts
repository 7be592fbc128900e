import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { eventually, registryClient } from "../helpers/registry-client.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("managed sidecars (engines.managed)", () => {
  let contextd: ContextdProcess;
  const startedPids = (): number[] =>
    contextd
      .logLines()
      .filter((l) => l.msg === "managed sidecar started" && l.sidecar === "nf")
      .map((l) => l.pid as number);

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: { required: true, runtimes: [{ token_env: "RT" }], operators: [{ token_env: "ADMIN" }] },
        slots: { context_engine: "nf" },
        engines: {
          health: { interval: "300ms", timeout: "200ms" },
          managed: [{ id: "nf", command: [process.execPath, path.join(REPO_ROOT, "dist/engines/newest-first/main.js")], env: { ENGINE_ID: "nf" } }],
        },
      },
      env: { RT: "runtime", ADMIN: "admin" },
    });
  });
  afterAll(async () => {
    await contextd?.cleanup();
  });

  it("starts the sidecar, which registers with a per-run owner token and serves the slot", async () => {
    const registry = registryClient(contextd.address);
    const cx = new ContextdClient({ address: contextd.address, token: "runtime" });
    try {
      const status = await eventually(async () => registry.get("nf", "admin").catch(() => undefined), 15_000);
      expect(status).toMatchObject({ owner: "local", health: EngineHealth.ENGINE_HEALTH_SERVING });
      await cx.appendMessages({ session: { sessionId: "m" }, messages: [user("hello")] });
      const res = await cx.assemble({ session: { sessionId: "m" }, tokenBudget: 1_000 });
      expect(res).toMatchObject({ engineId: "nf", mode: Mode.MODE_NORMAL });
      // The sidecar's own log lines are folded into contextd's, under `sidecar`.
      expect(contextd.logLines().some((l) => l.sidecar === "nf" && l.msg === "engine listening")).toBe(true);
    } finally {
      registry.close();
      cx.close();
    }
  });

  it("a killed sidecar is restarted within the backoff and serves again", async () => {
    const [firstPid] = startedPids();
    process.kill(firstPid, "SIGKILL");
    await eventually(async () => startedPids().length >= 2, 10_000);
    const secondPid = startedPids()[1];
    expect(secondPid).not.toBe(firstPid);
    const cx = new ContextdClient({ address: contextd.address, token: "runtime" });
    try {
      await eventually(async () => (await cx.assemble({ session: { sessionId: "m" }, tokenBudget: 1_000 })).engineId === "nf", 15_000, 200);
    } finally {
      cx.close();
    }
  });

  it("stops the sidecar on shutdown", async () => {
    const pids = startedPids();
    const last = pids[pids.length - 1];
    expect(alive(last)).toBe(true);
    expect(await contextd.stop("SIGTERM")).toBe(0);
    await eventually(async () => !alive(last), 10_000);
  });
});

describe("a managed sidecar's environment", () => {
  it("holds its own per-run owner token and none of contextd's secrets", async () => {
    const { mkdtempSync, writeFileSync, readFileSync, existsSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(path.join(tmpdir(), "contextd-envdump-"));
    const out = path.join(dir, "env.json");
    const script = path.join(dir, "envdump.cjs");
    // Writes its environment, then lives until contextd (its parent) is gone.
    writeFileSync(
      script,
      `require("fs").writeFileSync(${JSON.stringify(out)}, JSON.stringify(process.env));
       setInterval(() => { try { process.kill(Number(process.env.CONTEXTD_PARENT_PID), 0); } catch { process.exit(0); } }, 300);`,
    );
    const contextd = await startContextd({
      config: {
        auth: { required: true, owners: { acme: { token_env: "ACME_TOKEN" } }, operators: [{ token_env: "ADMIN_TOKEN" }], runtimes: [{ token_env: "RT" }] },
        engines: { managed: [{ id: "envdump", command: [process.execPath, script], env: { EXTRA: "given" } }] },
      },
      env: { ACME_TOKEN: "acme-secret", ADMIN_TOKEN: "admin-secret", RT: "runtime-secret" },
    });
    try {
      // The file exists as soon as the sidecar opens it: wait until its JSON is whole.
      const whole = () => {
        try {
          return JSON.parse(readFileSync(out, "utf8")) as Record<string, string>;
        } catch {
          return undefined;
        }
      };
      await eventually(async () => existsSync(out) && whole() !== undefined, 10_000);
      const env = whole()!;
      expect(env.EXTRA).toBe("given");
      expect(env.CONTEXTD_OWNER).toBe("local");
      expect(env.CONTEXTD_OWNER_TOKEN).toBeTruthy();
      expect(env.CONTEXTD_REGISTRY).toBe(contextd.address);
      expect(JSON.stringify(env)).not.toMatch(/acme-secret|admin-secret|runtime-secret/);
    } finally {
      await contextd.stop("SIGTERM");
      await contextd.cleanup();
    }
  });
});
