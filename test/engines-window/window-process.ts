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
 * itself if the test process disappears) and is SIGKILLed when the test process exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
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

export type LogLine = Record<string, unknown>;

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

const live = new Set<ChildProcess>();
let hooked = false;
function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", () => {
    for (const c of live) {
      try {
        c.kill("SIGKILL");
      } catch {
        // gone
      }
    }
  });
}

export async function startWindowEngine(opts: WindowEngineOptions = {}): Promise<WindowEngineProcess> {
  hook();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONTEXTD_") && !k.startsWith("WINDOW_")) env[k] = v;
  delete env.PYTHONHOME;
  delete env.PYTHONPATH;
  Object.assign(env, {
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
    CONTEXTD_ENGINE_LISTEN: opts.listen ?? "127.0.0.1:0",
    WINDOW_PARENT_PID: String(process.pid),
    WINDOW_LOG_LEVEL: "debug",
  });
  if (opts.registry) env.CONTEXTD_REGISTRY = opts.registry;
  if (opts.owner) env.CONTEXTD_OWNER = opts.owner;
  if (opts.ownerToken) env.CONTEXTD_OWNER_TOKEN = opts.ownerToken;
  Object.assign(env, opts.env ?? {});

  const child = spawn(PYTHON, [opts.script ?? WINDOW_MAIN], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  const lines: LogLine[] = [];
  const waiters = new Set<{ pred: (l: LogLine, i: number) => boolean; resolve: (l: LogLine) => void; reject: (e: Error) => void }>();
  let exitCode: number | null | undefined;
  const onChunk = (state: { rest: string }) => (chunk: string) => {
    output += chunk;
    state.rest += chunk;
    let nl: number;
    while ((nl = state.rest.indexOf("\n")) >= 0) {
      const line = state.rest.slice(0, nl).trim();
      state.rest = state.rest.slice(nl + 1);
      if (!line.startsWith("{")) continue;
      try {
        const obj = JSON.parse(line) as LogLine;
        const i = lines.push(obj) - 1;
        for (const w of [...waiters]) if (w.pred(obj, i)) w.resolve(obj);
      } catch {
        // not JSON
      }
    }
  };
  child.stderr!.setEncoding("utf8").on("data", onChunk({ rest: "" }));
  child.stdout!.setEncoding("utf8").on("data", onChunk({ rest: "" }));

  const exited = new Promise<number | null>((resolve) => {
    child.once("close", (code) => {
      exitCode = code;
      live.delete(child);
      for (const w of [...waiters]) w.reject(new Error(`the window engine exited (code ${String(code)}); output:\n${output}`));
      resolve(code);
    });
    child.once("error", (err) => {
      output += `\n[window-process] spawn failed: ${err.message}`;
    });
  });

  const waitForLog = (pred: (l: LogLine, i: number) => boolean, timeoutMs = 15_000): Promise<LogLine> => {
    const i = lines.findIndex((l, idx) => pred(l, idx));
    if (i >= 0) return Promise.resolve(lines[i]!);
    if (exitCode !== undefined) return Promise.reject(new Error(`the window engine has exited (code ${String(exitCode)}); output:\n${output}`));
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (l: LogLine) => {
          clearTimeout(timer);
          waiters.delete(w);
          resolve(l);
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          waiters.delete(w);
          reject(e);
        },
      };
      const timer = setTimeout(
        () => w.reject(new Error(`timed out after ${timeoutMs} ms waiting for a window engine log line; output:\n${output}`)),
        timeoutMs,
      );
      waiters.add(w);
    });
  };

  let listening: LogLine;
  try {
    listening = await waitForLog((l) => l.msg === "engine listening" && typeof l.address === "string", opts.timeoutMs ?? 30_000);
  } catch (err) {
    if (exitCode === undefined) child.kill("SIGKILL");
    await exited;
    throw err;
  }

  return {
    address: listening.address as string,
    pid: child.pid!,
    logLines: () => [...lines],
    logs: () => output,
    waitForLog,
    exitCode: () => exitCode,
    exited,
    stop: async (signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000) => {
      if (exitCode !== undefined) return exitCode;
      child.kill(signal);
      const timer = setTimeout(() => {
        if (exitCode === undefined) child.kill("SIGKILL");
      }, graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
