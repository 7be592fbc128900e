/** Starting sidecar engines (the bench's own, or another engine's main.js) and the echo server. */
import fs from "node:fs";
import path from "node:path";
import { registryClient, until } from "./clients.js";
import { BENCH_ENGINES_DIR, REPO_ROOT, spawnNode, type Child } from "./processes.js";

export interface EngineHandle {
  engineId: string;
  /** The instance id it registered (`instanceId`), or "" (then its endpoint names it). */
  instanceId: string;
  pid: number;
  child: Child;
}

export type BenchEngine = "passthrough" | "hang-compact";

/**
 * Starts one of bench/engines as a sidecar registered with the contextd at `registry` (owner
 * `bench`; the bench runs contextd with auth.required false) and waits until the registry lists it.
 * `instanceId`: register as that instance of `engineId` (CONTEXTD_ENGINE_INSTANCE_ID, no locality),
 * so several processes serve one engine id; then it waits until the registry lists that instance.
 */
export async function startBenchEngine(kind: BenchEngine, registry: string, engineId: string, opts: { instanceId?: string } = {}): Promise<EngineHandle> {
  const instanceId = opts.instanceId ?? "";
  const child = spawnNode({
    args: [path.join(BENCH_ENGINES_DIR, `${kind}.js`)],
    env: {
      CONTEXTD_REGISTRY: registry,
      CONTEXTD_OWNER: "bench",
      CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0",
      BENCH_ENGINE_ID: engineId,
      CONTEXTD_LOG_LEVEL: "warn",
      ...(instanceId ? { CONTEXTD_ENGINE_INSTANCE_ID: instanceId } : {}),
    },
  });
  const line = await child.waitForLine((l) => l.event === "registered", 30_000);
  if (line.ok !== true) throw new Error(`engine ${engineId}${instanceId ? ` (instance ${instanceId})` : ""} was not registered: ${String(line.message)}`);
  await waitForEngine(registry, engineId, 30_000, instanceId || undefined);
  return { engineId, instanceId, pid: child.pid, child };
}

/**
 * Polls RegistryService.GetEngine until `engineId` is registered and not quarantined (and, with
 * `instanceId`, lists that instance not quarantined).
 */
export async function waitForEngine(registry: string, engineId: string, timeoutMs = 30_000, instanceId?: string): Promise<void> {
  const reg = registryClient(registry);
  try {
    await until(async () => {
      const e = await reg.getEngine(engineId);
      if (!e || e.quarantine) return undefined;
      return instanceId === undefined || e.instances.some((i) => i.instanceId === instanceId && !i.quarantine) ? e : undefined;
    }, timeoutMs);
  } finally {
    reg.close();
  }
}

export interface EchoHandle {
  address: string;
  pid: number;
  child: Child;
}

export async function startEchoServer(): Promise<EchoHandle> {
  const child = spawnNode({ args: [path.join(BENCH_ENGINES_DIR, "echo-server.js")] });
  const line = await child.waitForLine((l) => l.event === "listening", 30_000);
  return { address: line.address as string, pid: child.pid, child };
}

/** The `lossless` engine's entry point (engines/lossless), when it has been built. */
export const LOSSLESS_MAIN = path.join(REPO_ROOT, "dist/engines/lossless/main.js");

export function losslessBuilt(): boolean {
  return fs.existsSync(LOSSLESS_MAIN);
}

/** Starts dist/engines/lossless/main.js registered with `registry`, its database in `dbPath`. */
export async function startLossless(registry: string, dbPath: string): Promise<EngineHandle> {
  const child = spawnNode({
    args: [LOSSLESS_MAIN],
    env: { CONTEXTD_REGISTRY: registry, CONTEXTD_OWNER: "bench", CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0", LOSSLESS_DB: dbPath, CONTEXTD_LOG_LEVEL: "warn" },
  });
  try {
    await Promise.race([
      waitForEngine(registry, "lossless", 60_000),
      child.exited.then(({ code, signal }) => {
        throw new Error(`lossless exited (code ${String(code)}, signal ${String(signal)}): ${child.output().slice(-2000)}`);
      }),
    ]);
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
  return { engineId: "lossless", instanceId: "", pid: child.pid, child };
}
