/**
 * Child processes for the benchmarks: contextd, sidecar engines, the echo server. Every child is
 * tracked and SIGKILLed when the bench process exits; temp dirs made here are removed then too
 * (set BENCH_KEEP_TMP=1 to keep them).
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repository root: dist/bench/harness → ../../.. */
export const REPO_ROOT = path.resolve(HERE, "../../..");
/** Compiled bench engines (dist/bench/engines). */
export const BENCH_ENGINES_DIR = path.resolve(HERE, "../engines");

const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let hooked = false;

function hook(): void {
  if (hooked) return;
  hooked = true;
  const cleanup = () => {
    for (const c of live) {
      try {
        c.kill("SIGKILL");
      } catch {
        // gone already
      }
    }
    live.clear();
    if (!process.env.BENCH_KEEP_TMP) for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  };
  process.on("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      cleanup();
      process.exit(130);
    });
  }
}

/** A fresh temp dir, removed when the bench exits (or by `removeTempDir`). */
export function makeTempDir(prefix: string): string {
  hook();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `contextd-bench-${prefix}-`));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  tempDirs.delete(dir);
  if (!process.env.BENCH_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
}

export interface Child {
  pid: number;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  /** Resolves with the first parsed JSON stdout/stderr line matching `predicate`. */
  waitForLine(predicate: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
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
  hook();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONTEXTD_")) env[k] = v;
  Object.assign(env, opts.env ?? {});
  const child = spawn(process.execPath, [...(opts.nodeFlags ?? []), ...opts.args], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  const parsed: Array<Record<string, unknown>> = [];
  const waiters: Array<{ p: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }> = [];
  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      running = false;
      live.delete(child);
      resolve({ code, signal });
    });
    child.once("error", () => {
      running = false;
      live.delete(child);
      resolve({ code: null, signal: null });
    });
  });
  const onData = (stream: NodeJS.ReadableStream) => {
    let rest = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      // Keep the last 200 kB only: a long run must not hold every log line.
      output = (output + chunk).slice(-200_000);
      rest += chunk;
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = rest.slice(0, nl).trim();
        rest = rest.slice(nl + 1);
        if (!line.startsWith("{")) continue;
        try {
          const obj = JSON.parse(line) as Record<string, unknown>;
          if (parsed.length < 1000) parsed.push(obj);
          for (const w of [...waiters]) {
            if (!w.p(obj)) continue;
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(obj);
          }
        } catch {
          // not JSON
        }
      }
    });
  };
  onData(child.stdout!);
  onData(child.stderr!);
  return {
    pid: child.pid ?? -1,
    output: () => output,
    isRunning: () => running,
    exited,
    waitForLine(predicate, timeoutMs = 30_000) {
      const found = parsed.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = { p: predicate, resolve: (l: Record<string, unknown>) => (clearTimeout(timer), resolve(l)) };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for a line from node ${opts.args.join(" ")}; output:\n${output.slice(-4000)}`));
        }, timeoutMs);
        void exited.then(({ code, signal }) => {
          if (!waiters.includes(waiter)) return;
          waiters.splice(waiters.indexOf(waiter), 1);
          clearTimeout(timer);
          reject(new Error(`node ${opts.args.join(" ")} exited (code ${String(code)}, signal ${String(signal)}); output:\n${output.slice(-4000)}`));
        });
        waiters.push(waiter);
      });
    },
    kill(signal = "SIGKILL") {
      if (running) child.kill(signal);
    },
    async stop(graceMs = 5_000) {
      if (!running) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => running && child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}
