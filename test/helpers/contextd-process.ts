/**
 * Starts a real contextd process (`node bin/contextd.js --config <file>`) for integration tests.
 *
 *   const cd = await startContextd({ config: { compaction: { keep_recent_tokens: 4000 } } });
 *   const client = new SessionServiceClient(cd.address, credentials.createInsecure());
 *   ...
 *   await cd.stop();
 *
 * The config is YAML, written to a fresh temp dir; `opts.config` is deep-merged over
 * {@link baseConfig} (plain objects merge key by key; arrays and scalars replace; a `null` value
 * removes the key). Readiness is the pino JSON line `{"msg":"contextd listening","address":"..."}`
 * on stdout (spec §7).
 *
 * Environment: the child gets `process.env` minus every inherited `CONTEXTD_*` variable (so a
 * developer's shell cannot change the config under test; set `inheritContextdEnv` to keep them),
 * plus `opts.env`.
 *
 * Every child is tracked and SIGKILLed when the test process exits; the temp dirs the harness
 * created are removed then too (set CONTEXTD_TEST_KEEP_TMP=1 to keep them for debugging).
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repository root (cwd of the child). */
export const REPO_ROOT = path.resolve(HERE, "../..");
/** The contextd executable the harness runs with `process.execPath`. */
export const CONTEXTD_BIN = path.resolve(HERE, "../../bin/contextd.js");

export interface ContextdProcess {
  /** The bound gRPC address from the `contextd listening` line, e.g. `127.0.0.1:45123`. */
  address: string;
  /**
   * The bound metrics address, when the `contextd listening` line carries it (`metrics_address`,
   * `metricsAddress` or `metrics`) or a later `metrics listening` line does; else undefined.
   */
  metricsAddress?: string;
  dataDir: string;
  configPath: string;
  pid: number;
  /** The config that was written (after merging). */
  config: Record<string, unknown>;
  /** Everything the process wrote so far, stdout and stderr interleaved in arrival order. */
  logs(): string;
  /** Parsed pino lines of stdout so far (lines that are not JSON are skipped). */
  logLines(): Array<Record<string, unknown>>;
  /** Resolves when a log line matching `predicate` has been written (rejects after `timeoutMs`). */
  waitForLog(predicate: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** The exit code once the process has exited (null if it died of a signal), undefined before. */
  exitCode(): number | null | undefined;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<number | null>;
  /**
   * Sends `signal` (default SIGTERM) and resolves with the exit code. If the process has not exited
   * after `graceMs` (default 15 s) it is SIGKILLed.
   */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
  /** SIGKILLs the process and waits for it to exit. */
  kill9(): Promise<void>;
  /**
   * Stops this process (SIGTERM) if it still runs and starts a new one on the same data dir with the
   * same options (`more` is merged over them). The new process listens on a new address.
   */
  restart(more?: StartContextdOptions): Promise<ContextdProcess>;
  /**
   * SIGKILLs the process if it still runs and removes the temp dirs the harness created for it
   * (config dir; data dir unless it was passed in). Temp dirs are also removed when the test process
   * exits, unless CONTEXTD_TEST_KEEP_TMP is set.
   */
  cleanup(): Promise<void>;
}

export interface StartContextdOptions {
  /** Deep-merged over the base config. */
  config?: Record<string, unknown>;
  /** Added to the child's environment. */
  env?: Record<string, string>;
  /** Reuse a data dir (e.g. to restart on the same SQLite file). Default: the fresh temp dir. */
  dataDir?: string;
  /** How long to wait for `contextd listening` (default 30 s). */
  timeoutMs?: number;
  /** Keep `CONTEXTD_*` variables inherited from `process.env` (default false). */
  inheritContextdEnv?: boolean;
  /** Extra command-line arguments after `--config <file>`. */
  args?: string[];
  /** The script to run instead of bin/contextd.js (e.g. a fake, to test the harness itself). */
  bin?: string;
}

/** The keys every harness config starts from. */
export function baseConfig(dataDir: string): Record<string, unknown> {
  return {
    listen: "127.0.0.1:0",
    metrics_listen: "127.0.0.1:0",
    store: `sqlite:${path.join(dataDir, "contextd.db")}`,
    auth: { required: false },
    log_level: "info",
  };
}

/** Thrown when contextd does not become ready; carries what it wrote. */
export class ContextdStartError extends Error {
  constructor(
    message: string,
    readonly output: string,
    readonly exitCode: number | null | undefined,
    readonly signal: NodeJS.Signals | null | undefined,
  ) {
    super(message);
    this.name = "ContextdStartError";
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/** Plain objects merge recursively; arrays and scalars replace; `null` deletes; `undefined` is ignored. */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  if (!over) return out;
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    if (value === null) delete out[key];
    else if (isPlainObject(value) && isPlainObject(out[key])) out[key] = deepMerge(out[key] as Record<string, unknown>, value);
    else out[key] = value;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Child tracking: every child still alive is SIGKILLed when this process exits.
// ---------------------------------------------------------------------------------------------

const live = new Set<ChildProcess>();
/** Temp dirs this harness created; removed at exit unless CONTEXTD_TEST_KEEP_TMP is set. */
const tempDirs = new Set<string>();
let hooksInstalled = false;

function removeTempDirs(): void {
  if (process.env.CONTEXTD_TEST_KEEP_TMP) return;
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function killAll(): void {
  for (const child of live) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  live.clear();
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  const atExit = (): void => {
    killAll();
    try {
      removeTempDirs();
    } catch {
      // best effort
    }
  };
  process.on("exit", atExit);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = (): void => {
      atExit();
      // If nobody else handles the signal, restore the default behaviour (terminate).
      if (process.listenerCount(sig) === 1) {
        process.removeListener(sig, onSignal);
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, onSignal);
  }
}

interface Spawned {
  child: ChildProcess;
  configPath: string;
  dataDir: string;
  config: Record<string, unknown> | undefined;
  /** Resolves once the process exited and its pipes closed (or 300 ms after exit, in case a
   * grandchild still holds them). */
  closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The fresh temp dir holding the config (and the data, unless opts.dataDir). */
  tmp: string;
}

function spawnContextd(opts: StartContextdOptions & { rawConfig?: string }): Spawned {
  installHooks();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-test-"));
  tempDirs.add(tmp);
  const dataDir = opts.dataDir ?? tmp;
  fs.mkdirSync(dataDir, { recursive: true });
  const config = opts.rawConfig === undefined ? deepMerge(baseConfig(dataDir), opts.config) : undefined;
  const configPath = path.join(tmp, "contextd.yaml");
  fs.writeFileSync(configPath, opts.rawConfig ?? stringify(config));

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!opts.inheritContextdEnv && k.startsWith("CONTEXTD_")) continue;
    env[k] = v;
  }
  Object.assign(env, opts.env ?? {});

  const child = spawn(process.execPath, [opts.bin ?? CONTEXTD_BIN, "--config", configPath, ...(opts.args ?? [])], {
    cwd: REPO_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    let result: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    const finish = (): void => {
      live.delete(child);
      resolve(result ?? { code: child.exitCode, signal: child.signalCode });
    };
    child.once("exit", (code, signal) => {
      result = { code, signal };
      live.delete(child);
      setTimeout(finish, 300);
    });
    child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
      result ??= { code, signal };
      finish();
    });
    // A failed spawn emits 'error' and maybe no 'exit'.
    child.once("error", () => setTimeout(finish, 100));
  });
  return { child, configPath, dataDir, config, closed, tmp };
}

/** Starts a contextd and waits until it is listening. */
export async function startContextd(opts: StartContextdOptions = {}): Promise<ContextdProcess> {
  const { child, configPath, dataDir, config, closed, tmp } = spawnContextd(opts);

  let output = "";
  const parsed: Array<Record<string, unknown>> = [];
  interface Waiter {
    predicate: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
    reject: (err: Error) => void;
  }
  const waiters: Waiter[] = [];
  let stdoutRest = "";
  let metricsAddress: string | undefined;
  let exitCode: number | null | undefined;
  let exitSignal: NodeJS.Signals | null | undefined;

  const onLine = (line: string): void => {
    if (!line.trim().startsWith("{")) return;
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (!isPlainObject(obj)) return;
    parsed.push(obj);
    const m = obj.metrics_address ?? obj.metricsAddress ?? (obj.msg === "metrics listening" ? obj.address : undefined) ?? obj.metrics;
    if (typeof m === "string" && !metricsAddress) metricsAddress = m;
    for (const w of [...waiters]) {
      if (w.predicate(obj)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(obj);
      }
    }
  };

  child.stdout!.setEncoding("utf8");
  child.stderr!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    output += chunk;
    stdoutRest += chunk;
    let nl: number;
    while ((nl = stdoutRest.indexOf("\n")) >= 0) {
      const line = stdoutRest.slice(0, nl);
      stdoutRest = stdoutRest.slice(nl + 1);
      onLine(line);
    }
  });
  child.stderr!.on("data", (chunk: string) => {
    output += chunk;
  });

  const exitedDrained = closed.then(({ code, signal }) => {
    exitCode = code;
    exitSignal = signal;
    // Nothing more will be logged: fail whoever still waits for a line.
    for (const w of waiters.splice(0))
      w.reject(new Error(`contextd exited (code ${String(code)}, signal ${String(signal)}) before the awaited log line; output:\n${output}`));
    return code;
  });
  child.once("exit", (code, signal) => {
    exitCode = code;
    exitSignal = signal;
  });
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));

  const waitForLog = (predicate: (l: Record<string, unknown>) => boolean, timeoutMs = 10_000): Promise<Record<string, unknown>> => {
    const found = parsed.find(predicate);
    if (found) return Promise.resolve(found);
    if (exitCode !== undefined) return Promise.reject(new Error(`contextd has exited; output:\n${output}`));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for a log line; output so far:\n${output}`));
      }, timeoutMs);
      waiters.push(waiter);
    });
  };

  const timeoutMs = opts.timeoutMs ?? 30_000;
  const describeExit = (): string => (exitSignal ? `signal ${exitSignal}` : `code ${String(exitCode)}`);
  const ready = await Promise.race([
    waitForLog((l) => l.msg === "contextd listening" && typeof l.address === "string", timeoutMs).then(
      (l) => ({ kind: "ready" as const, line: l }),
      // Rejected on timeout, or because the process exited (then exitCode is set).
      () => (exitCode !== undefined ? { kind: "exit" as const } : { kind: "timeout" as const }),
    ),
    exitedDrained.then(() => ({ kind: "exit" as const })),
    spawnError.then((err) => ({ kind: "error" as const, err })),
  ]);

  if (ready.kind !== "ready") {
    if (exitCode === undefined) {
      child.kill("SIGKILL");
      await exitedDrained;
    }
    const why =
      ready.kind === "timeout"
        ? `contextd did not log "contextd listening" within ${timeoutMs} ms`
        : ready.kind === "error"
          ? `contextd could not be spawned: ${ready.err.message}`
          : `contextd exited (${describeExit()}) before it was listening`;
    throw new ContextdStartError(`${why} (config ${configPath}, bin ${opts.bin ?? CONTEXTD_BIN}); output:\n${output}`, output, exitCode, exitSignal);
  }

  const address = ready.line.address as string;
  const stop = async (signal: NodeJS.Signals = "SIGTERM", graceMs = 15_000): Promise<number | null> => {
    if (exitCode !== undefined) return exitCode;
    child.kill(signal);
    const timer = setTimeout(() => {
      if (exitCode === undefined) child.kill("SIGKILL");
    }, graceMs);
    try {
      return await exitedDrained;
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    address,
    get metricsAddress() {
      return metricsAddress;
    },
    dataDir,
    configPath,
    pid: child.pid!,
    config: config ?? {},
    logs: () => output,
    logLines: () => [...parsed],
    waitForLog,
    exitCode: () => exitCode,
    exited: exitedDrained,
    stop,
    kill9: async () => {
      if (exitCode === undefined) child.kill("SIGKILL");
      await exitedDrained;
    },
    cleanup: async () => {
      if (exitCode === undefined) child.kill("SIGKILL");
      await exitedDrained;
      // The data dir is `tmp` unless it was passed in (e.g. by restart(): then it is kept).
      fs.rmSync(tmp, { recursive: true, force: true });
      tempDirs.delete(tmp);
    },
    restart: async (more: StartContextdOptions = {}) => {
      await stop();
      return startContextd({ ...opts, ...more, config: deepMerge(opts.config ?? {}, more.config), dataDir });
    },
  };
}

export interface ContextdRunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  configPath: string;
}

/**
 * Runs contextd with a config until it exits on its own (or `timeoutMs`, default 15 s, passes: then
 * it is SIGKILLed and `code` is null). For "exits non-zero with a one-line reason" tests. With
 * `rawConfig` the file is written verbatim instead of merging over the base config.
 */
export async function runContextdUntilExit(opts: StartContextdOptions & { rawConfig?: string } = {}): Promise<ContextdRunResult> {
  const { child, configPath, closed } = spawnContextd(opts);
  // Nothing to inspect afterwards but the output: the config dir goes at exit with the others.
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 15_000);
  let spawnError: Error | undefined;
  child.once("error", (err) => (spawnError = err));
  const { code, signal } = await closed;
  clearTimeout(timer);
  if (spawnError) throw spawnError;
  return { code, signal, stdout, stderr, configPath };
}
