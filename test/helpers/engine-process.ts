/**
 * Misbehaving context engines as REAL separate processes, for registry / quarantine / fallback
 * integration tests. Two implementations with the same CLI, control file and stdout protocol:
 *
 * - Python (test/engines/python/misbehaving_engine.py), run with Debian's /usr/bin/python3 and
 *   python3-grpcio, with clients/python on PYTHONPATH: the `contextd` package's committed stubs
 *   (contextd.v1, contextd.health.v1).
 * - TypeScript (test/engines/ts/misbehaving-engine.ts), built on the engine SDK's `serveEngine`;
 *   compiled on demand with the project's TypeScript (together with the SDK sources it imports)
 *   into os.tmpdir()/contextd-test-engines-<hash of the sources>, then run with node.
 *
 *   const engine = await startPythonEngine({ engineId: "flaky", registry: cd.address, owner: "acme", ownerToken: "s3cret" });
 *   expect(await engine.registered).toMatchObject({ ok: true });
 *   engine.control({ assemble: "hang" });           // read by the engine on its next call
 *   ...                                             // SessionService.Assemble falls back to legacy
 *   await engine.waitForEvent((e) => e.event === "cancelled" && e.op === "assemble");
 *   await engine.stop();
 *
 * Control file (JSON, re-read by the engine on EVERY call, so flipping it needs no restart):
 * `{ assemble?: MODE, compact?: MODE, ingest?: MODE, bootstrap?: MODE, after_turn?: MODE,
 * maintain?: MODE, subagent?: MODE, get_info?: MODE, health?: HEALTH, leak_host_token_to?: "/path",
 * ignore_cancel_ms?: 30000, slow_ms?: 300, late_ms?: 200 }`; a missing key means "ok" / "SERVING" /
 * the default duration. `control(c)` REPLACES the whole file (atomically: write + rename), it does
 * not merge. `ingest` also governs IngestBatch; `subagent` governs PrepareSubagentSpawn,
 * RollbackSubagentSpawn and OnSubagentEnded.
 *
 * Optional RPCs: by default both engines advertise no capabilities (a correct host never calls
 * Bootstrap, IngestBatch, AfterTurn, Maintain or the subagent RPCs; the Python engine answers them
 * harmlessly, the TS one UNIMPLEMENTED). `capabilities: [...]` (or "all") starts the engine with
 * those RPCs implemented and advertised; they then follow their control key like the others. OK
 * answers: Bootstrap bootstrapped=true; IngestBatch ingested_count = messages; AfterTurn empty;
 * Maintain changed=false; PrepareSubagentSpawn rollback_handle "mb-<child session id>"; the other
 * subagent RPCs empty.
 *
 * Modes:
 * - "ok": Assemble returns the newest request.messages that fit token_budget (all without a
 *   budget), tool calls and their results kept together, never starting with a tool result,
 *   estimated_tokens = sum of token_count, prompt_authority ASSEMBLED. Compact: with
 *   `ownsCompaction`, compacted=true, summary "test summary", first_kept_entry_id = id of the last
 *   user message in request.messages (compacted=false when there is none); without, it delegates to
 *   the host (HostService.DelegateCompaction on request.host.endpoint with `authorization: Bearer
 *   <host.token>`, deadline no later than host.expires_at_ms and the call's own deadline) and returns
 *   the host's answer; a host error is returned with the host's status code. Ingest → ingested=true.
 * - "hang": waits until the call is cancelled or its deadline passes, logs a `cancelled` event.
 * - "ignore_cancel": sleeps `ignore_cancel_ms` (30 s) ignoring cancellation, then answers as "ok"
 *   would and logs `answered_late` (the call had ended; the answer goes nowhere) or `answered`.
 * - "crash": the process exits with code 3 mid-call.
 * - "crash_after" (TS engine only): does what "ok" does (a delegating Compact has the host commit its
 *   compaction), logs `{event:"crashing_after", op}`, then exits with code 3 before answering.
 * - "throw": INTERNAL "misbehaving engine: told to throw".
 * - "garbage": Assemble returns all request.messages plus a padding message (id "garbage-padding",
 *   token_count = budget + 1000) with estimated_tokens = that sum and prompt_authority ASSEMBLED;
 *   Compact returns ok, compacted=true with first_kept_entry_id "no-such-entry"; Ingest returns
 *   ingested=false.
 * - "slow": sleeps `slow_ms` (300 ms), honouring cancellation (then it logs `cancelled`), then
 *   answers as "ok" and logs `answered`.
 * - "late": ignores cancellation and answers as "ok" `late_ms` (200 ms) after the call's deadline
 *   (logs `answered_late`: the answer goes nowhere). Without a deadline it answers at once.
 * - "garbage_bytes": the answer on the wire is bytes no protobuf message decodes from (the caller
 *   sees INTERNAL "Response message parsing error"). Works for every RPC, GetInfo and health.
 * - "over_budget": Assemble as "garbage" (over the budget); other RPCs answer as "ok".
 * - "unknown_entry": Assemble puts a message of its own (id "no-such-entry", 5 tokens) before the
 *   newest messages that fit the budget minus 50 — which the contract allows; Compact as
 *   "garbage" (first_kept_entry_id "no-such-entry"); Maintain calls
 *   HostService.RewriteTranscriptEntries for entry "no-such-entry" and answers the host's error
 *   with the host's status; other RPCs answer as "ok".
 * - "by_reference" (TS engine only): Assemble answers by id (kept_entry_ids, through the SDK's
 *   `keepMessages`): a note of its own (6 tokens, no id) in `messages`, then the newest messages that
 *   fit the budget minus 50 as kept_entry_ids. "reference_unknown", "reference_twice" and
 *   "reference_order" break that answer: an id the view does not have appended, the last id named
 *   again, the ids reversed. Other RPCs answer as "ok".
 * - `get_info` (GetInfo): "ok", "hang" (logs `cancelled` when the call ends), "throw", "crash",
 *   "garbage_bytes", "slow" / "ignore_cancel" / "late" (answer after the wait, logging `answered`
 *   or `answered_late`). GetInfo is logged (`call`) only when told to misbehave.
 * - `health` (grpc.health.v1 Check of "" and contextd.v1.ContextEngineService): "SERVING"
 *   (default), "NOT_SERVING", "hang" (never answers), "slow" (SERVING after `slow_ms`), "throw"
 *   (INTERNAL), "garbage_bytes", "crash" (logs `call` op "health", exits 3).
 * - `leak_host_token_to`: on every Assemble/Compact whose request carries a HostContext, the engine
 *   writes `{op, endpoint, token, expires_at_ms, session_id, session:{session_id, session_key,
 *   agent_id}}` as JSON to that path (atomically), before acting on the mode.
 * - Health Watch: UNIMPLEMENTED in Python, the SDK's own in TS, not control-driven.
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
 * GetInfo: id = engineId, name "Misbehaving test engine", version "1.0.0", owns_compaction per the
 * option, protocol_versions [1], capabilities per `capabilities` (all false by default).
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
 * hash and stays in os.tmpdir() for the next run.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { childEnv, makeTempDir, spawnChild, trackTempDir } from "../../bench/harness/child-process.js";
import { PYTHON, PYTHON_PACKAGE_DIR, requirePythonGrpc } from "./python.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "../..");
export const PYTHON_ENGINE = path.join(REPO_ROOT, "test/engines/python/misbehaving_engine.py");
export const TS_ENGINE = path.join(REPO_ROOT, "test/engines/ts/misbehaving-engine.ts");

export type EngineMode =
  | "ok"
  | "hang"
  | "ignore_cancel"
  | "crash"
  | "crash_after"
  | "throw"
  | "garbage"
  | "garbage_bytes"
  | "slow"
  | "late"
  | "over_budget"
  | "unknown_entry"
  | "by_reference"
  | "reference_unknown"
  | "reference_twice"
  | "reference_order";

/** What the control file can make an RPC do (each key is read on every call of that RPC). */
export type EngineOp = "assemble" | "compact" | "ingest" | "bootstrap" | "after_turn" | "maintain" | "subagent" | "get_info";

/** grpc.health.v1 Check: an answer, or a misbehaviour. */
export type HealthMode = "SERVING" | "NOT_SERVING" | "hang" | "slow" | "throw" | "garbage_bytes" | "crash";

/** The optional RPCs an engine can be started with (`capabilities`). */
export type EngineCapability = "bootstrap" | "ingest_batch" | "after_turn" | "maintain" | "subagents";

export type EngineControl = Partial<Record<EngineOp, EngineMode>> & {
  health?: HealthMode;
  /** Write the HostContext of every Assemble/Compact to this file (see the module comment). */
  leak_host_token_to?: string;
  /** How long "ignore_cancel" sleeps before answering (default 30000). */
  ignore_cancel_ms?: number;
  /** How long "slow" sleeps before answering (default 300). */
  slow_ms?: number;
  /** How long after the call's deadline "late" answers (default 200). */
  late_ms?: number;
};

/** One parsed stdout line of an engine. */
export interface EngineEvent {
  event: string;
  [key: string]: unknown;
}

/** What the HostContext leak file contains. */
export interface LeakedHostContext {
  op: "assemble" | "compact";
  endpoint: string;
  token: string;
  expires_at_ms: number;
  session_id: string;
  session: { session_id: string; session_key: string; agent_id: string };
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

// -------------------------------------------------------------------------------------------------
// Python: the contextd package
// -------------------------------------------------------------------------------------------------

/**
 * True when the Python engine can run here (Debian python3 with grpc and protobuf); otherwise it
 * throws — it never answers false — so that the Python rows of a test fail instead of being skipped
 * quietly (CI installs the packages: .ci/run).
 */
export function pythonEnginesAvailable(): true {
  requirePythonGrpc();
  return true;
}

/**
 * The directory the Python engine needs on PYTHONPATH: clients/python, whose `contextd` package
 * carries the committed stubs (nothing is generated any more). Throws when Debian's python3 cannot
 * import grpc, so a test that needs the Python engine fails instead of skipping.
 */
export function ensurePythonEngineStubs(): string {
  requirePythonGrpc();
  return PYTHON_PACKAGE_DIR;
}

// -------------------------------------------------------------------------------------------------
// TypeScript: compile on demand
// -------------------------------------------------------------------------------------------------

let tsCompiled: Promise<string> | undefined;

function listTs(dir: string, out: string[]): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) listTs(p, out);
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) out.push(p);
  }
}

/** A hash of everything the compiled engine depends on: the engine, src/**, tsconfig, TypeScript. */
function sourcesHash(): string {
  const files = [TS_ENGINE, path.join(REPO_ROOT, "tsconfig.json"), path.join(REPO_ROOT, "node_modules/typescript/package.json")];
  listTs(path.join(REPO_ROOT, "src"), files);
  const h = createHash("sha256");
  for (const f of files.sort()) {
    h.update(path.relative(REPO_ROOT, f));
    h.update("\0");
    h.update(fs.readFileSync(f));
    h.update("\0");
  }
  return h.digest("hex").slice(0, 16);
}

/**
 * Compiles test/engines/ts/misbehaving-engine.ts and the SDK sources it imports with the project's
 * TypeScript (a temp tsconfig extending ../../tsconfig.json, rootDir = the repo root) into
 * os.tmpdir()/contextd-test-engines-<hash>, once per process (and reused across processes while
 * the sources do not change). The output dir gets `package.json` `{"type":"module"}` and a
 * `node_modules` symlink to the repo's, so the ESM output resolves its dependencies. Resolves with
 * the path of the compiled engine.
 */
export function compileTsEngine(): Promise<string> {
  tsCompiled ??= doCompileTsEngine();
  return tsCompiled;
}

async function doCompileTsEngine(): Promise<string> {
  const finalDir = path.join(os.tmpdir(), `contextd-test-engines-${sourcesHash()}`);
  const entry = path.join(finalDir, "test/engines/ts/misbehaving-engine.js");
  const marker = path.join(finalDir, ".complete");
  if (fs.existsSync(marker) && fs.existsSync(entry)) return entry;

  pruneOldBuilds(finalDir);
  const buildDir = `${finalDir}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  fs.mkdirSync(buildDir, { recursive: true });
  const tsconfigPath = path.join(buildDir, "tsconfig.json");
  fs.writeFileSync(
    tsconfigPath,
    JSON.stringify(
      {
        extends: path.join(REPO_ROOT, "tsconfig.json"),
        compilerOptions: {
          rootDir: REPO_ROOT,
          outDir: buildDir,
          declaration: false,
          sourceMap: false,
          incremental: false,
          // The tsconfig lives in the temp dir: point type lookup at the repo's node_modules.
          typeRoots: [path.join(REPO_ROOT, "node_modules/@types")],
        },
        files: [TS_ENGINE],
        include: [],
      },
      null,
      2,
    ),
  );
  const tsc = path.join(REPO_ROOT, "node_modules/typescript/bin/tsc");
  let diagnostics = "";
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", tsconfigPath], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    diagnostics = `${e.stdout ?? ""}${e.stderr ?? ""}` || e.message;
  }
  fs.rmSync(tsconfigPath, { force: true });
  const builtEntry = path.join(buildDir, "test/engines/ts/misbehaving-engine.js");
  if (!fs.existsSync(builtEntry)) {
    fs.rmSync(buildDir, { recursive: true, force: true });
    throw new Error(`compiling ${TS_ENGINE} failed:\n${diagnostics}`);
  }
  if (diagnostics) {
    // tsc emits despite type errors; errors in code under construction elsewhere must not block the
    // engine tests (the repo's typecheck reports them), but say so.
    const ownErrors = diagnostics.split("\n").filter((l) => l.includes("misbehaving-engine.ts"));
    if (ownErrors.length > 0) {
      fs.rmSync(buildDir, { recursive: true, force: true });
      throw new Error(`type errors in the TS test engine:\n${diagnostics}`);
    }
    console.warn(`[engine-process] tsc reported errors outside the test engine (compiled anyway):\n${diagnostics}`);
  }
  fs.writeFileSync(path.join(buildDir, "package.json"), JSON.stringify({ type: "module", private: true }));
  fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(buildDir, "node_modules"), "dir");
  fs.writeFileSync(path.join(buildDir, ".complete"), new Date().toISOString());
  try {
    fs.renameSync(buildDir, finalDir);
  } catch {
    // Another test process finished the same build first (or a broken leftover is in the way).
    if (!fs.existsSync(marker)) {
      fs.rmSync(finalDir, { recursive: true, force: true });
      try {
        fs.renameSync(buildDir, finalDir);
        return entry;
      } catch {
        // fall through: run from our own build dir
      }
      trackTempDir(buildDir);
      return builtEntry;
    }
    fs.rmSync(buildDir, { recursive: true, force: true });
  }
  return entry;
}

/** Removes builds of older sources (not touched for an hour), so the cache does not pile up. */
function pruneOldBuilds(keep: string): void {
  const cutoff = Date.now() - 3600_000;
  try {
    for (const name of fs.readdirSync(os.tmpdir())) {
      if (!name.startsWith("contextd-test-engines-")) continue;
      const p = path.join(os.tmpdir(), name);
      if (p === keep) continue;
      try {
        if (fs.statSync(p).mtimeMs < cutoff) fs.rmSync(p, { recursive: true, force: true });
      } catch {
        // raced with another process: fine
      }
    }
  } catch {
    // best effort
  }
}

// -------------------------------------------------------------------------------------------------
// Starting engines
// -------------------------------------------------------------------------------------------------

function writeControl(file: string, c: EngineControl): void {
  const tmp = `${file}.tmp-${randomBytes(4).toString("hex")}`;
  fs.writeFileSync(tmp, JSON.stringify(c));
  fs.renameSync(tmp, file);
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

/** Reads the file an engine wrote for `leak_host_token_to` (undefined while it does not exist). */
export function readLeakedHostContext(file: string): LeakedHostContext | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as LeakedHostContext;
  } catch {
    return undefined;
  }
}

/** Starts the named kind of engine: handy for `describe.each(["python", "ts"])`. */
export function startEngine(kind: "python" | "ts", opts: StartEngineOptions): Promise<EngineProcess> {
  return kind === "python" ? startPythonEngine(opts) : startTsEngine(opts);
}

export { PYTHON };
