/**
 * The `window` sample engine (engines/window/main.py) as a REAL child process for integration tests:
 * `/usr/bin/python3 engines/window/main.py` from the repository root, configured through the SDK
 * environment (CONTEXTD_REGISTRY, CONTEXTD_OWNER, CONTEXTD_OWNER_TOKEN, CONTEXTD_ENGINE_LISTEN).
 *
 *   const engine = await startWindowEngine({ registry: cd.address, owner: "team", ownerToken: "t" });
 *   await engine.waitForLog((l) => l.msg === "registered with the registry");
 *   expect(await engine.stop()).toBe(0);
 *
 * The engine logs JSON lines on stderr (the Python engine SDK's); readiness is
 * `{"msg":"engine listening","address":...}`. The child runs without PYTHONPATH (main.py finds
 * clients/python itself, as under contextd's managed sidecars), gets WINDOW_PARENT_PID (it stops by
 * itself if the test process disappears) and is SIGKILLed when the test process exits
 * (bench/harness/child-process.ts).
 */
import { childEnv, spawnChild, type LogLine } from "../../bench/harness/child-process.js";
import { PYTHON, REPO_ROOT } from "../helpers/python.js";

export const WINDOW_MAIN = "engines/window/main.py";

export interface WindowEngineOptions {
  /**
   * The Python script to run (relative to the repository root), default engines/window/main.py; any
   * engine built on the Python engine SDK logs the same lines (test/python-engine-sdk runs its probe).
   */
  script?: string;
  registry?: string;
  owner?: string;
  ownerToken?: string;
  /** Default 127.0.0.1:0. */
  listen?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

export type { LogLine };

export interface WindowEngineProcess {
  /** The bound address from the `engine listening` line (the real port). */
  address: string;
  pid: number;
  logLines(): LogLine[];
  logs(): string;
  waitForLog(pred: (l: LogLine, index: number) => boolean, timeoutMs?: number): Promise<LogLine>;
  exitCode(): number | null | undefined;
  exited: Promise<number | null>;
  /** Sends `signal` (default SIGTERM); resolves with the exit code (SIGKILL after `graceMs`, default 10 s). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

export async function startWindowEngine(opts: WindowEngineOptions = {}): Promise<WindowEngineProcess> {
  const env = childEnv(["CONTEXTD_", "WINDOW_"], {
    PYTHONHOME: undefined,
    PYTHONPATH: undefined,
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
    CONTEXTD_ENGINE_LISTEN: opts.listen ?? "127.0.0.1:0",
    WINDOW_PARENT_PID: String(process.pid),
    WINDOW_LOG_LEVEL: "debug",
    CONTEXTD_REGISTRY: opts.registry || undefined,
    CONTEXTD_OWNER: opts.owner || undefined,
    CONTEXTD_OWNER_TOKEN: opts.ownerToken || undefined,
    ...opts.env,
  });
  const child = spawnChild({ name: "the window engine", cmd: PYTHON, args: [opts.script ?? WINDOW_MAIN], cwd: REPO_ROOT, env });
  const waitForLog = (pred: (l: LogLine, i: number) => boolean, timeoutMs = 15_000): Promise<LogLine> => child.waitForLine(pred, timeoutMs);

  let listening: LogLine;
  try {
    listening = await waitForLog((l) => l.msg === "engine listening" && typeof l.address === "string", opts.timeoutMs ?? 30_000);
  } catch (err) {
    await child.kill9();
    throw err;
  }

  return {
    address: listening.address as string,
    pid: child.pid,
    logLines: child.lines,
    logs: child.output,
    waitForLog,
    exitCode: child.exitCode,
    exited: child.exited.then((s) => s.code),
    stop: (signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000) => child.stop(signal, graceMs),
  };
}
