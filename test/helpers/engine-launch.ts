/**
 * Starting a misbehaving engine (Python or TypeScript) as a real process, and what the test sees
 * of it: its stdout event log, its registration outcome, stop / kill. The control file and the
 * modes are in engine-modes.ts.
 *
 * Stdout events (one JSON object per line; `events()` returns them parsed, in order):
 *   {event:"listening", address, pid}
 *   {event:"registered", ok, refusal, message, existing_owner, protocol_version}
 *      refusal is the Refusal enum name ("REFUSAL_NONE", "REFUSAL_OWNED_BY_OTHER", ...) or, when the
 *      registry answered with an error status, the status name ("UNAUTHENTICATED", ...).
 *   {event:"call", op, mode}   (op: a control key, or "health" for a crash in Check)
 *   {event:"assemble_request", prompt, messages}   (TS engine: every Assemble, before its mode acts;
 *      `prompt` as the request carried it, `messages` how many the view held)
 *   {event:"cancelled", op, reason:"deadline"|"cancelled"}
 *   {event:"answered" | "answered_late", op, mode}   (ignore_cancel / slow produced their answer,
 *      in time / after the call had already ended)
 *   {event:"subagent_ended", session_id, reason}   (TS engine, OnSubagentEnded answered ok; reason is
 *      the SubagentEndReason name, e.g. "SUBAGENT_END_REASON_SWEPT")
 *   {event:"stopping", signal}
 *
 * Registration (when `registry` is given; `owner` is then required): RegisterEngine(engine_id,
 * owner, endpoint = the bound address, allow_same_owner_refresh = true, protocol_versions = [1]) with
 * `authorization: Bearer <ownerToken>`, retried every 200 ms while the registry is unreachable.
 * The Python engine stops at the first answer and never registers again. The TS engine uses the
 * SDK's Registrar: it also keeps retrying after a REFUSAL_UNREACHABLE answer (so `registered`
 * settles only once it is admitted or refused for good), and its heartbeat (GetEngine every 2 s,
 * `heartbeatMs` to change) registers it again when the registry lost it (e.g. a restarted contextd
 * without the engine). `stop()` (SIGTERM) deregisters the engine when it was registered, then
 * exits 0.
 *
 * Every engine is SIGKILLed when the test process exits, and also exits by itself when its parent
 * (the test process) disappears. Temp dirs (control files) are removed at exit
 * unless CONTEXTD_TEST_KEEP_TMP is set; the compiled TS engine is a cache keyed by the sources'
 * hash and stays in the checkout's node_modules/.cache for the next run.
 */
import path from "node:path";
import { childEnv, makeTempDir, spawnChild } from "../../bench/harness/child-process.js";
import { type EngineCapability, type EngineControl, writeControl } from "./engine-modes.js";
import { ensurePythonEngineStubs, PYTHON_ENGINE } from "./python-engine.js";
import { PYTHON, PYTHON_PACKAGE_DIR } from "./python.js";
import { compileTsEngine } from "./ts-engine-build.js";
import { REPO_ROOT } from "./contextd-process.js";

/** One parsed stdout line of an engine. */
export interface EngineEvent {
  event: string;
  [key: string]: unknown;
}

export interface RegistrationOutcome {
  ok: boolean;
  /** Refusal enum name, or a gRPC status name, or "NO_REGISTRY" when started without a registry. */
  refusal?: string;
  message?: string;
  existing_owner?: string;
  protocol_version?: number;
}

export interface EngineProcess {
  kind: "python" | "ts";
  /** host:port the engine listens on (the real port when it was started on port 0). */
  address: string;
  pid: number;
  engineId: string;
  /** The control file the engine reads on every call. */
  controlPath: string;
  /** This engine's temp dir (holds the control file; a good place for leak files). */
  dir: string;
  /** Replaces the control file atomically (write + rename). Takes effect on the engine's next call. */
  control(c: EngineControl): void;
  /**
   * The first `registered` event. Without a registry it resolves `{ ok: false, refusal:
   * "NO_REGISTRY" }` at once; it rejects when the engine exits before registering. (A rejection
   * nobody awaits is not reported as unhandled.)
   */
  registered: Promise<RegistrationOutcome>;
  /** Parsed stdout JSON lines so far, in order. */
  events(): EngineEvent[];
  /**
   * The first event (already seen or future) for which `pred(event, index)` is true; use the index
   * to skip old events (`const n = engine.events().length; ... waitForEvent((e, i) => i >= n && ...)`).
   * Rejects after `timeoutMs` (default 10 s; Infinity: no limit) or when the engine exits first.
   */
  waitForEvent(pred: (e: EngineEvent, index: number) => boolean, timeoutMs?: number): Promise<EngineEvent>;
  /** stdout and stderr interleaved, as written. */
  logs(): string;
  /** The exit code once exited (null when killed by a signal), undefined while running. */
  exitCode(): number | null | undefined;
  /** SIGKILL and wait for the exit. */
  kill9(): Promise<void>;
  /** SIGTERM (the engine deregisters if registered and exits 0); SIGKILL after 5 s. */
  stop(): Promise<void>;
  /** The exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

export interface StartEngineOptions {
  engineId: string;
  /** contextd's address; the engine registers there (needs `owner`). */
  registry?: string;
  owner?: string;
  /** Sent as CONTEXTD_OWNER_TOKEN → `authorization: Bearer <token>`. */
  ownerToken?: string;
  ownsCompaction?: boolean;
  /** The initial control file (default `{}`: everything "ok", SERVING). */
  control?: EngineControl;
  /** Default 127.0.0.1:0. */
  listen?: string;
  /** Extra environment for the child (CONTEXTD_* variables of the test process are not inherited). */
  env?: Record<string, string>;
  /** How long to wait for the `listening` line (default 30 s). */
  timeoutMs?: number;
  /** TS engine only: the SDK's registration heartbeat interval (default 2000 ms; register again when lost). */
  heartbeatMs?: number;
  /** The optional RPCs to implement (default none: capabilities all false); "all" for every one. */
  capabilities?: EngineCapability[] | "all";
}

function engineArgs(opts: StartEngineOptions, controlPath: string): string[] {
  if (opts.registry && !opts.owner) throw new Error("startEngine: `registry` needs `owner`");
  const args = ["--engine-id", opts.engineId, "--control", controlPath, "--listen", opts.listen ?? "127.0.0.1:0"];
  if (opts.registry) args.push("--registry", opts.registry, "--owner", opts.owner!);
  if (opts.ownsCompaction) args.push("--owns-compaction");
  const caps = opts.capabilities === "all" ? "all" : (opts.capabilities ?? []).join(",");
  if (caps) args.push("--capabilities", caps);
  args.push("--parent-pid", String(process.pid));
  return args;
}

function engineEnv(opts: StartEngineOptions, extra: Record<string, string>): NodeJS.ProcessEnv {
  return childEnv(["CONTEXTD_"], {
    CONTEXTD_TEST_KEEP_TMP: process.env.CONTEXTD_TEST_KEEP_TMP || undefined,
    ...extra,
    ...opts.env,
    ...(opts.ownerToken !== undefined ? { CONTEXTD_OWNER_TOKEN: opts.ownerToken } : {}),
  });
}

/** Starts the Python misbehaving engine and waits for its `listening` line. */
export async function startPythonEngine(opts: StartEngineOptions): Promise<EngineProcess> {
  ensurePythonEngineStubs();
  const dir = makeTempDir(`contextd-engine-${safe(opts.engineId)}-`);
  const controlPath = path.join(dir, "control.json");
  writeControl(controlPath, opts.control ?? {});
  // The package from this tree (its stubs: contextd.v1, contextd.health.v1), never an installed one.
  const env = engineEnv(opts, { PYTHONPATH: PYTHON_PACKAGE_DIR, PYTHONUNBUFFERED: "1", PYTHONDONTWRITEBYTECODE: "1" });
  delete env.PYTHONHOME;
  return launch("python", PYTHON, [PYTHON_ENGINE, ...engineArgs(opts, controlPath)], env, opts, dir, controlPath);
}

/** Compiles (once) and starts the TypeScript (engine SDK) misbehaving engine; waits for `listening`. */
export async function startTsEngine(opts: StartEngineOptions): Promise<EngineProcess> {
  const entry = await compileTsEngine();
  const dir = makeTempDir(`contextd-engine-${safe(opts.engineId)}-`);
  const controlPath = path.join(dir, "control.json");
  writeControl(controlPath, opts.control ?? {});
  const args = [entry, ...engineArgs(opts, controlPath)];
  if (opts.heartbeatMs !== undefined) args.push("--heartbeat-ms", String(opts.heartbeatMs));
  const env = engineEnv(opts, { CONTEXTD_LOG_LEVEL: process.env.TEST_ENGINE_LOG_LEVEL ?? "info" });
  return launch("ts", process.execPath, args, env, opts, dir, controlPath);
}

function safe(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 40);
}

async function launch(
  kind: "python" | "ts",
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: StartEngineOptions,
  dir: string,
  controlPath: string,
): Promise<EngineProcess> {
  const child = spawnChild({
    name: `${kind} engine "${opts.engineId}"`,
    cmd,
    args,
    cwd: REPO_ROOT,
    env,
    parse: "stdout",
    accept: (l) => typeof l.event === "string",
  });
  const waitForEvent = (pred: (e: EngineEvent, i: number) => boolean, timeoutMs = 10_000): Promise<EngineEvent> =>
    child.waitForLine((l, i) => pred(l as EngineEvent, i), timeoutMs) as Promise<EngineEvent>;

  let listening: EngineEvent;
  try {
    listening = await waitForEvent((e) => e.event === "listening" && typeof e.address === "string", opts.timeoutMs ?? 30_000);
  } catch (err) {
    await child.kill9();
    throw new Error(`${kind} engine "${opts.engineId}" did not start: ${(err as Error).message}`);
  }

  const registered: Promise<RegistrationOutcome> = opts.registry
    ? waitForEvent((e) => e.event === "registered", Number.POSITIVE_INFINITY).then((e) => {
        const { event: _event, ...outcome } = e;
        return outcome as unknown as RegistrationOutcome;
      })
    : Promise.resolve({ ok: false, refusal: "NO_REGISTRY", message: "started without a registry" });
  registered.catch(() => undefined);

  return {
    kind,
    address: listening.address as string,
    pid: child.pid,
    engineId: opts.engineId,
    controlPath,
    dir,
    control: (c) => writeControl(controlPath, c),
    registered,
    events: () => child.lines() as EngineEvent[],
    waitForEvent,
    logs: child.output,
    exitCode: child.exitCode,
    kill9: child.kill9,
    stop: async () => {
      await child.stop("SIGTERM", 5_000);
    },
    exited: child.exited.then((s) => s.code),
  };
}

/** Starts the named kind of engine: handy for `describe.each(["python", "ts"])`. */
export function startEngine(kind: "python" | "ts", opts: StartEngineOptions): Promise<EngineProcess> {
  return kind === "python" ? startPythonEngine(opts) : startTsEngine(opts);
}
