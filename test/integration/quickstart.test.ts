import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/contextd-process.js";
import { eventually } from "../helpers/registry-client.js";

const run = promisify(execFile);
const contextctl = (...args: string[]) => run(process.execPath, [path.join(REPO_ROOT, "bin/contextctl.js"), ...args]);

interface EngineRow {
  engineId: string;
  health: string | number;
}

/**
 * The README's quick start, as written: `npm start` runs contextd on the checked-in default config
 * — legacy plus the two sample engines as managed sidecars — and `contextctl` talks to it. Only the
 * ports and the data files are moved (CONTEXTD_* overrides), so tests can run in parallel.
 */
describe("quick start: npm start, then contextctl", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "contextd-quickstart-"));
  let output = "";
  let address = "";
  const child = spawn("npm", ["start", "--silent"], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      CONTEXTD_LISTEN: "127.0.0.1:0",
      CONTEXTD_METRICS_LISTEN: "127.0.0.1:0",
      CONTEXTD_STORE: `sqlite:${dataDir}/contextd.db`,
      CONTEXTD_ENGINES__MANAGED__0__ENV__LOSSLESS_DB: `${dataDir}/lossless.db`,
      CONTEXTD_ENGINES__MANAGED__2__ENV__RECALL_DB: `${dataDir}/recall.db`,
    },
    detached: true,
  });
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const logLines = () =>
    output
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeAll(async () => {
    address = await eventually(async () => logLines().find((l) => l.msg === "contextd listening")?.address as string | undefined, 30_000);
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  afterAll(async () => {
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {
      // already gone
    }
    await exited; // npm, contextd and its sidecars have stopped writing into dataDir
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("logs `contextd listening` and `contextctl health` answers SERVING", async () => {
    const health = await contextctl("--address", address, "health");
    expect(health.stdout).toContain("SERVING");
  });

  it("`contextctl engines` lists legacy, lossless, window and recall SERVING within a few seconds", async () => {
    const rows = await eventually(
      async () => {
        const { stdout } = await contextctl("--address", address, "--json", "engines");
        const { engines } = JSON.parse(stdout) as { engines: EngineRow[] };
        const serving = engines.filter((e) => e.health === "ENGINE_HEALTH_SERVING" || e.health === 1 || e.health === "SERVING");
        return serving.length === 4 ? engines : undefined;
      },
      20_000,
      300,
    );
    expect(rows.map((e) => e.engineId).sort()).toEqual(["legacy", "lossless", "recall", "window"]);
  });

  it("a killed managed engine comes back within the restart backoff", async () => {
    const started = () => logLines().filter((l) => l.msg === "managed sidecar started" && l.sidecar === "window");
    const [first] = started();
    process.kill(first.pid as number, "SIGKILL");
    await eventually(async () => started().length >= 2, 10_000);
    await eventually(
      async () => {
        const { stdout } = await contextctl("--address", address, "--json", "engines");
        const { engines } = JSON.parse(stdout) as { engines: (EngineRow & { quarantine?: unknown })[] };
        const window = engines.find((e) => e.engineId === "window");
        return window && !window.quarantine && (window.health === "ENGINE_HEALTH_SERVING" || window.health === 1 || window.health === "SERVING");
      },
      20_000,
      300,
    );
  });
});
