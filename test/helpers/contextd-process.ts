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
 * created are removed then too (set CONTEXTD_TEST_KEEP_TMP=1 to keep them for debugging). Both,
 * and the reading of the child's lines, are the shared helper's: bench/harness/child-process.ts.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { childEnv, makeTempDir, removeTempDir, spawnChild, type Child, type LogLine } from "../../bench/harness/child-process.js";

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

/** The fresh temp dir (config; data too unless `opts.dataDir`), the config, and the spawned child. */
function spawnContextd(opts: StartContextdOptions & { rawConfig?: string }): {
  child: Child;
  tmp: string;
  dataDir: string;
  configPath: string;
  config?: Record<string, unknown>;
} {
  const tmp = makeTempDir("contextd-test-");
  const dataDir = opts.dataDir ?? tmp;
  fs.mkdirSync(dataDir, { recursive: true });
  const config = opts.rawConfig === undefined ? deepMerge(baseConfig(dataDir), opts.config) : undefined;
  const configPath = path.join(tmp, "contextd.yaml");
  fs.writeFileSync(configPath, opts.rawConfig ?? stringify(config));
  const child = spawnChild({
    name: "contextd",
    cmd: process.execPath,
    args: [opts.bin ?? CONTEXTD_BIN, "--config", configPath, ...(opts.args ?? [])],
    cwd: REPO_ROOT,
    env: childEnv(opts.inheritContextdEnv ? [] : ["CONTEXTD_"], opts.env),
    parse: "stdout",
  });
  return { child, tmp, dataDir, configPath, config };
}

/** Starts a contextd and waits until it is listening. */
export async function startContextd(opts: StartContextdOptions = {}): Promise<ContextdProcess> {
  const { child, tmp, dataDir, configPath, config } = spawnContextd(opts);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let ready: LogLine;
  try {
    ready = await child.waitForLine((l) => l.msg === "contextd listening" && typeof l.address === "string", timeoutMs);
  } catch {
    // Timed out, exited, or never spawned.
    const status = child.exitStatus();
    await child.kill9();
    const spawnError = child.spawnError();
    const why = spawnError
      ? `contextd could not be spawned: ${spawnError.message}`
      : status === undefined
        ? `contextd did not log "contextd listening" within ${timeoutMs} ms`
        : `contextd exited (${status.signal ? `signal ${status.signal}` : `code ${String(status.code)}`}) before it was listening`;
    const output = child.output();
    const after = child.exitStatus();
    throw new ContextdStartError(`${why} (config ${configPath}, bin ${opts.bin ?? CONTEXTD_BIN}); output:\n${output}`, output, after?.code, after?.signal);
  }

  const exited = child.exited.then((s) => s.code);
  const stop = (signal: NodeJS.Signals = "SIGTERM", graceMs = 15_000): Promise<number | null> => child.stop(signal, graceMs);
  return {
    address: ready.address as string,
    get metricsAddress() {
      for (const l of child.lines()) {
        const m = l.metrics_address ?? l.metricsAddress ?? (l.msg === "metrics listening" ? l.address : undefined) ?? l.metrics;
        if (typeof m === "string") return m;
      }
      return undefined;
    },
    dataDir,
    configPath,
    pid: child.pid,
    config: config ?? {},
    logs: child.output,
    logLines: child.lines,
    waitForLog: (predicate, timeoutMs = 10_000) => child.waitForLine(predicate, timeoutMs),
    exitCode: child.exitCode,
    exited,
    stop,
    kill9: child.kill9,
    cleanup: async () => {
      await child.kill9();
      // The data dir is `tmp` unless it was passed in (e.g. by restart(): then it is kept).
      removeTempDir(tmp);
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
  const { child, configPath } = spawnContextd(opts);
  // Nothing to inspect afterwards but the output: the config dir goes at exit with the others.
  let stdout = "";
  let stderr = "";
  child.process.stdout!.on("data", (c: string) => (stdout += c));
  child.process.stderr!.on("data", (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 15_000);
  const { code, signal } = await child.exited;
  clearTimeout(timer);
  const spawnError = child.spawnError();
  if (spawnError) throw spawnError;
  return { code, signal, stdout, stderr, configPath };
}
