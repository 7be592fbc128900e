/**
 * Child processes for the benchmarks: contextd, sidecar engines, the echo server — on the shared
 * child-process helper (./child-process.ts), which SIGKILLs every child still alive when the bench
 * process exits and removes the temp dirs made here then too (set BENCH_KEEP_TMP=1 to keep them).
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { childEnv, makeTempDir as makeDir, removeTempDir, spawnChild, type ExitStatus, type LogLine } from "./child-process.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repository root: dist/bench/harness → ../../.. */
export const REPO_ROOT = path.resolve(HERE, "../../..");
/** Compiled bench engines (dist/bench/engines). */
export const BENCH_ENGINES_DIR = path.resolve(HERE, "../engines");

/** A fresh temp dir, removed when the bench exits (or by `removeTempDir`). */
export function makeTempDir(prefix: string): string {
  return makeDir(`contextd-bench-${prefix}-`, "BENCH_KEEP_TMP");
}

export { removeTempDir };

export interface Child {
  pid: number;
  /** stdout and stderr so far, interleaved (the newest 200 kB). */
  output(): string;
  /** Resolves with the first parsed JSON stdout/stderr line matching `predicate`. */
  waitForLine(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  exited: Promise<ExitStatus>;
  isRunning(): boolean;
  kill(signal?: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  args: string[];
  env?: Record<string, string>;
  /** Node flags before the script (e.g. --cpu-prof). */
  nodeFlags?: string[];
}

/** Spawns `node <args>` in the repository root with `process.env` (minus CONTEXTD_*) plus `env`. */
export function spawnNode(opts: SpawnOptions): Child {
  const child = spawnChild({
    name: `node ${opts.args.join(" ")}`,
    cmd: process.execPath,
    args: [...(opts.nodeFlags ?? []), ...opts.args],
    cwd: REPO_ROOT,
    env: childEnv(["CONTEXTD_"], opts.env),
    // A long run must not hold every log line.
    maxOutputChars: 200_000,
    maxLines: 1000,
    errorOutputChars: 4000,
  });
  return {
    pid: child.pid,
    output: child.output,
    isRunning: child.isRunning,
    exited: child.exited,
    waitForLine: (predicate, timeoutMs = 30_000) => child.waitForLine(predicate, timeoutMs),
    kill: child.kill,
    stop: async (graceMs = 5_000) => {
      await child.stop("SIGTERM", graceMs);
    },
  };
}
