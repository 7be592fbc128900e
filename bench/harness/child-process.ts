/**
 * The one child-process helper behind every launcher of real processes, in the tests
 * (test/helpers/contextd-process.ts, test/helpers/engine-process.ts,
 * test/engines-window/window-process.ts, test/engines-lossless/lossless-process.ts) and the
 * benchmarks (bench/harness/processes.ts): spawn a child, keep its stdout and stderr interleaved,
 * split them into lines, parse the JSON ones, wait for a line (on the event, never by polling), stop
 * it (a signal, then SIGKILL after a grace period), and make sure nothing outlives the parent: every
 * child still alive is SIGKILLed when this process exits, and the temp dirs made here are removed.
 *
 *   const c = spawnChild({ name: "contextd", cmd: process.execPath, args: [bin], cwd, env: childEnv(["CONTEXTD_"]) });
 *   const ready = await c.waitForLine((l) => l.msg === "contextd listening", 30_000);
 *   await c.stop();
 *
 * Where it lives, and why here: the benchmarks run from dist/, and tsconfig.json compiles src/,
 * engines/ and bench/ — not test/ — so a helper under test/ would drag test files into the build,
 * while the tests (vitest on the sources, tsconfig.test.json, which includes bench/) can import from
 * bench/ as they are. The lint zones (eslint.config.js) constrain only src/ and engines/. So the
 * helper sits in bench/harness and imports nothing but node: — never src/ or test/ — to stay
 * beneath both of its users.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** One parsed JSON line a child wrote. */
export type LogLine = Record<string, unknown>;
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How long to wait after 'exit' for 'close': a grandchild may still hold the pipes open. */
const DRAIN_MS = 300;

// Tracking: neither children nor temp dirs outlive this process.
const live = new Set<ChildProcess>();
/** Temp dir → the environment variable that, when set, keeps it (for debugging). */
const tempDirs = new Map<string, string>();
let hooked = false;

function atExit(): void {
  for (const child of live) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  live.clear();
  for (const [dir, keepVar] of tempDirs) {
    if (process.env[keepVar]) continue;
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  tempDirs.clear();
}

function installExitHooks(): void {
  if (hooked) return;
  hooked = true;
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

/** Removes `dir` when this process exits, unless the environment variable `keepVar` is set. */
export function trackTempDir(dir: string, keepVar = "CONTEXTD_TEST_KEEP_TMP"): void {
  installExitHooks();
  tempDirs.set(dir, keepVar);
}

/** A fresh dir os.tmpdir()/<prefix>XXXXXX, removed at exit (see {@link trackTempDir}). */
export function makeTempDir(prefix: string, keepVar = "CONTEXTD_TEST_KEEP_TMP"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  trackTempDir(dir, keepVar);
  return dir;
}

/** Removes a dir made by {@link makeTempDir} now (unless its keep variable is set). */
export function removeTempDir(dir: string): void {
  const keepVar = tempDirs.get(dir);
  tempDirs.delete(dir);
  if (keepVar === undefined || !process.env[keepVar]) fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * `process.env` without the variables whose names start with one of `dropPrefixes` (so a
 * developer's shell cannot change the configuration under test), plus `extra` (an undefined value
 * removes the variable).
 */
export function childEnv(dropPrefixes: string[], extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!dropPrefixes.some((p) => k.startsWith(p))) env[k] = v;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export interface SpawnChildOptions {
  /** What error messages call the child, e.g. `contextd` or `python engine "flaky"`. */
  name: string;
  cmd: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The streams whose JSON lines are parsed (default both); both always go to `output()`. */
  parse?: "stdout" | "stderr" | "both";
  /** Parsed lines for which this is false are dropped (default: every JSON object is kept). */
  accept?: (line: LogLine) => boolean;
  /** Keep only the newest this many characters of output (default all: a long bench run sets it). */
  maxOutputChars?: number;
  /** Keep at most this many parsed lines; later ones still reach waiters (default all). */
  maxLines?: number;
  /** How many characters of output an error message quotes, from the end (default all kept). */
  errorOutputChars?: number;
}

export interface Child {
  readonly process: ChildProcess;
  /** The child's pid (-1 when it could not be spawned). */
  readonly pid: number;
  /** Everything it wrote so far, stdout and stderr interleaved in arrival order. */
  output(): string;
  /** The parsed JSON lines so far, in order (a copy). */
  lines(): LogLine[];
  /**
   * The first line, already written or future, for which `pred(line, index)` holds. Rejects after
   * `timeoutMs` (default 10 s; Infinity: never) or once the child has exited without writing one.
   */
  waitForLine(pred: (line: LogLine, index: number) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** The exit code once it has exited (null when a signal killed it), undefined while it runs. */
  exitCode(): number | null | undefined;
  /** How it exited, once it has; undefined while it runs. */
  exitStatus(): ExitStatus | undefined;
  isRunning(): boolean;
  /** Why it could not be spawned, if it could not. */
  spawnError(): Error | undefined;
  /** Resolves once it has exited and its last lines have been read. */
  exited: Promise<ExitStatus>;
  /** Sends `signal` (default SIGKILL) if it still runs. */
  kill(signal?: NodeJS.Signals): void;
  /** Sends `signal` (default SIGTERM), SIGKILL after `graceMs` (default 10 s); resolves with the exit code. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
  /** SIGKILL, and wait until it has exited. */
  kill9(): Promise<void>;
}

interface Waiter {
  pred: (line: LogLine, index: number) => boolean;
  resolve: (line: LogLine) => void;
  reject: (err: Error) => void;
}

export function spawnChild(opts: SpawnChildOptions): Child {
  installExitHooks();
  const child = spawn(opts.cmd, opts.args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  const parse = opts.parse ?? "both";
  let output = "";
  const lines: LogLine[] = [];
  let count = 0;
  const waiters = new Set<Waiter>();
  let status: ExitStatus | undefined;
  let finished = false;
  let spawnErr: Error | undefined;
  const tail = (): string => (opts.errorOutputChars === undefined ? output : output.slice(-opts.errorOutputChars));
  const exitError = (): Error =>
    new Error(`${opts.name} exited (code ${String(status?.code)}, signal ${String(status?.signal)}) before the awaited log line; output:\n${tail()}`);

  const onLine = (raw: string): void => {
    const text = raw.trim();
    if (!text.startsWith("{")) return;
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    if (opts.accept && !opts.accept(line)) return;
    const index = count++;
    if (opts.maxLines === undefined || lines.length < opts.maxLines) lines.push(line);
    for (const w of [...waiters]) if (w.pred(line, index)) w.resolve(line);
  };
  const rests: Array<() => void> = [];
  for (const name of ["stdout", "stderr"] as const) {
    const parsed = parse === "both" || parse === name;
    let rest = "";
    child[name].setEncoding("utf8");
    child[name].on("data", (chunk: string) => {
      output += chunk;
      if (opts.maxOutputChars !== undefined && output.length > opts.maxOutputChars) output = output.slice(-opts.maxOutputChars);
      if (!parsed) return;
      rest += chunk;
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        onLine(line);
      }
    });
    // A last line without a newline still counts once the stream has ended.
    rests.push(() => {
      if (rest) onLine(rest);
      rest = "";
    });
  }

  const exited = new Promise<ExitStatus>((resolve) => {
    const finish = (): void => {
      if (finished) return;
      finished = true;
      status ??= { code: child.exitCode, signal: child.signalCode };
      live.delete(child);
      for (const flush of rests) flush();
      for (const w of [...waiters]) w.reject(exitError());
      resolve(status);
    };
    child.once("exit", (code, signal) => {
      status = { code, signal };
      live.delete(child);
      setTimeout(finish, DRAIN_MS);
    });
    child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
      status ??= { code, signal };
      finish();
    });
    child.on("error", (err) => {
      // Only a failed spawn ends the child; a failed kill() also lands here.
      if (child.pid !== undefined) return;
      spawnErr ??= err;
      output += `\n[${opts.name}] spawn failed: ${err.message}\n`;
      setTimeout(finish, 100);
    });
  });

  const waitForLine = (pred: (line: LogLine, index: number) => boolean, timeoutMs = 10_000): Promise<LogLine> => {
    const i = lines.findIndex((l, idx) => pred(l, idx));
    if (i >= 0) return Promise.resolve(lines[i]!);
    if (finished) return Promise.reject(exitError());
    return new Promise<LogLine>((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer);
        waiters.delete(w);
      };
      const w: Waiter = {
        pred,
        resolve: (l) => (settle(), resolve(l)),
        reject: (err) => (settle(), reject(err)),
      };
      const timer = Number.isFinite(timeoutMs)
        ? setTimeout(
            () => w.reject(new Error(`timed out after ${timeoutMs} ms waiting for a log line from ${opts.name}; output so far:\n${tail()}`)),
            timeoutMs,
          )
        : undefined;
      waiters.add(w);
    });
  };

  const kill = (signal: NodeJS.Signals = "SIGKILL"): void => {
    if (status === undefined) child.kill(signal);
  };
  return {
    process: child,
    pid: child.pid ?? -1,
    output: () => output,
    lines: () => [...lines],
    waitForLine,
    exitCode: () => status?.code,
    exitStatus: () => status,
    isRunning: () => status === undefined && !finished,
    spawnError: () => spawnErr,
    exited,
    kill,
    stop: async (signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000) => {
      kill(signal);
      const timer = setTimeout(() => kill("SIGKILL"), graceMs);
      try {
        return (await exited).code;
      } finally {
        clearTimeout(timer);
      }
    },
    kill9: async () => {
      kill("SIGKILL");
      await exited;
    },
  };
}
