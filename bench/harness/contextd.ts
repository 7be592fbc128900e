/**
 * Starts a real contextd (`node bin/contextd.js --config <tmp yaml>`) for a benchmark: listen on
 * 127.0.0.1:0, a fresh SQLite file, `auth.required: false`, log level `info` (the production default:
 * contextd logs no line per request at info, only starts, registrations, quarantines and fallbacks).
 * Readiness is the pino line `{"msg":"contextd listening","address":...}`.
 */
import fs from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { makeTempDir, removeTempDir, spawnNode, REPO_ROOT, type Child } from "./processes.js";

export interface ContextdHandle {
  address: string;
  pid: number;
  dataDir: string;
  child: Child;
  stop(): Promise<void>;
}

export interface ContextdOptions {
  /** Deep-merged over the base config. */
  config?: Record<string, unknown>;
  /** Node flags (e.g. `--cpu-prof`, `--cpu-prof-dir=...`). */
  nodeFlags?: string[];
  /** Log level (default `info`: contextd logs only its start, warnings and errors on the paths measured here). */
  logLevel?: string;
  /** Use this data dir instead of a fresh temp dir (it is then not removed on stop). */
  dataDir?: string;
  /** Extra environment (CONTEXTD_* of the bench process is never inherited). */
  env?: Record<string, string>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Record<string, unknown>, v) : v;
  }
  return out;
}

export async function startContextd(opts: ContextdOptions = {}): Promise<ContextdHandle> {
  const tmp = makeTempDir("contextd");
  const dataDir = opts.dataDir ?? tmp;
  const config = deepMerge(
    {
      listen: "127.0.0.1:0",
      metrics_listen: "127.0.0.1:0",
      store: `sqlite:${path.join(dataDir, "contextd.db")}`,
      auth: { required: false },
      log_level: opts.logLevel ?? "info",
    },
    opts.config,
  );
  const configPath = path.join(tmp, "contextd.yaml");
  fs.writeFileSync(configPath, stringify(config));
  // BENCH_CPU_PROF=DIR: every contextd writes a V8 CPU profile into DIR when it stops.
  const prof = process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  // BENCH_NODE_FLAGS="--flag …": extra V8/Node flags for every contextd (GC settings, traces), to try one.
  const extra = (process.env.BENCH_NODE_FLAGS ?? "").split(/\s+/).filter(Boolean);
  const child = spawnNode({
    args: [path.join(REPO_ROOT, "bin/contextd.js"), "--config", configPath],
    nodeFlags: [...prof, ...extra, ...(opts.nodeFlags ?? [])],
    env: opts.env,
  });
  const ready = await child.waitForLine((l) => l.msg === "contextd listening" && typeof l.address === "string", 60_000);
  return {
    address: ready.address as string,
    pid: child.pid,
    dataDir,
    child,
    async stop() {
      await child.stop(10_000);
      removeTempDir(tmp);
    },
  };
}
