import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { newToken, type Authenticator } from "./auth.js";
import type { ManagedEngineConfig } from "./config.js";

/** First restart delay; doubles per consecutive crash up to MAX_BACKOFF_MS. */
const INITIAL_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 10_000;
/** A sidecar that ran this long is considered healthy again: its next crash restarts quickly. */
const STABLE_AFTER_MS = 30_000;
/** How long a sidecar gets to deregister and drain on shutdown before SIGKILL. */
const STOP_GRACE_MS = 5_000;

interface Sidecar {
  spec: ManagedEngineConfig;
  child?: ChildProcess;
  startedAt: number;
  crashes: number;
  restartTimer?: NodeJS.Timeout;
  revokeToken?: () => void;
}

/**
 * Engine sidecars contextd runs itself (`engines.managed`): a local stack without Docker. Each
 * command is started with a minimal environment (PATH, HOME, locale, temp dirs; plus its `env`) and
 * what an engine needs to register (the registry address, its owner and a fresh per-run owner token), restarted with backoff when it exits, its output folded
 * into contextd's logs under `sidecar: <id>`, and stopped (SIGTERM, then SIGKILL) on shutdown.
 */
export class ManagedSidecars {
  private readonly sidecars: Sidecar[];
  private stopping = false;
  private registry = "";

  constructor(
    specs: ManagedEngineConfig[],
    private readonly auth: Authenticator,
    private readonly log: Logger,
  ) {
    this.sidecars = specs.map((spec) => ({ spec, startedAt: 0, crashes: 0 }));
  }

  /** Starts every sidecar, pointing it at the registry contextd just bound. */
  start(registryAddress: string): void {
    this.registry = registryAddress;
    for (const sidecar of this.sidecars) this.launch(sidecar);
  }

  /** Process ids by engine id (for `contextctl doctor` and tests). */
  pids(): Record<string, number | undefined> {
    return Object.fromEntries(this.sidecars.map((s) => [s.spec.id, s.child?.pid]));
  }

  private launch(sidecar: Sidecar): void {
    const { spec } = sidecar;
    const token = newToken();
    sidecar.revokeToken = this.auth.addOwnerToken(spec.owner, token);
    const env = {
      ...baseEnvironment(process.env),
      CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0",
      ...spec.env,
      CONTEXTD_REGISTRY: this.registry,
      CONTEXTD_OWNER: spec.owner,
      CONTEXTD_OWNER_TOKEN: token,
      CONTEXTD_PARENT_PID: String(process.pid),
    };
    const log = this.log.child({ sidecar: spec.id });
    const child = spawn(spec.command[0], spec.command.slice(1), { cwd: spec.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    sidecar.child = child;
    sidecar.startedAt = Date.now();
    log.info({ pid: child.pid, command: spec.command }, "managed sidecar started");
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream! }).on("line", (line) => relay(log, line));
    }
    child.on("error", (err) => log.error({ err }, "managed sidecar could not be started"));
    child.on("exit", (code, signal) => this.onExit(sidecar, code, signal));
  }

  private onExit(sidecar: Sidecar, code: number | null, signal: NodeJS.Signals | null): void {
    sidecar.revokeToken?.();
    sidecar.child = undefined;
    if (this.stopping) return;
    if (Date.now() - sidecar.startedAt >= STABLE_AFTER_MS) sidecar.crashes = 0;
    const delay = Math.min(INITIAL_BACKOFF_MS * 2 ** sidecar.crashes, MAX_BACKOFF_MS);
    sidecar.crashes++;
    this.log.warn({ sidecar: sidecar.spec.id, code, signal, restartInMs: delay }, "managed sidecar exited; restarting");
    sidecar.restartTimer = setTimeout(() => this.launch(sidecar), delay);
  }

  /** SIGTERM every sidecar (they deregister and drain), SIGKILL what is left after the grace time. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.sidecars.map(async (sidecar) => {
        clearTimeout(sidecar.restartTimer);
        const child = sidecar.child;
        if (!child || child.exitCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}

/**
 * What a sidecar inherits from contextd's environment: only what a process needs to run. Never the
 * secrets contextd holds (operator, runtime and other owners' tokens live in its environment), so a
 * sidecar can prove nothing but its own owner, with the per-run token it is given.
 */
const INHERITED = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "TMPDIR",
  "TEMP",
  "TMP",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];

function baseEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of INHERITED) if (env[key] !== undefined) out[key] = env[key]!;
  return out;
}

/** A sidecar's JSON log line keeps its fields under contextd's logger; other lines are logged as text. */
function relay(log: Logger, line: string): void {
  if (!line.trim()) return;
  try {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    if (parsed && typeof parsed === "object") {
      const { msg, level, time, pid, ...fields } = parsed;
      void time;
      log[levelOf(level)]({ ...fields, sidecarPid: pid }, typeof msg === "string" ? msg : line);
      return;
    }
  } catch {
    // not JSON
  }
  log.info(line);
}

/** pino's numeric levels or the usual names; anything else is info. */
function levelOf(level: unknown): "error" | "warn" | "info" | "debug" {
  if (typeof level === "number") return level >= 50 ? "error" : level >= 40 ? "warn" : level >= 30 ? "info" : "debug";
  const name = String(level ?? "").toLowerCase();
  if (name === "error" || name === "fatal" || name === "critical") return "error";
  if (name === "warn" || name === "warning") return "warn";
  if (name === "debug" || name === "trace") return "debug";
  return "info";
}
