/**
 * A contextd context engine built on the engine SDK (`serveEngine`) that can be told to misbehave,
 * for registry / quarantine / fallback tests. The TypeScript twin of
 * test/engines/python/misbehaving_engine.py: same CLI, same control file, same stdout lines.
 *
 *   node misbehaving-engine.js --engine-id ID --control FILE [--listen 127.0.0.1:0]
 *        [--registry ADDR --owner OWNER] [--owns-compaction] [--parent-pid PID] [--heartbeat-ms N]
 *        [--capabilities bootstrap,ingest_batch,after_turn,maintain,subagents,forget | all]
 *
 * Test code, not product code: tsconfig.json does not compile it into dist. The test helper
 * (test/helpers/engine-process.ts startTsEngine) compiles it on demand, together with the SDK
 * sources it imports, into a temp dir and runs it with node.
 *
 * The owner token comes from CONTEXTD_OWNER_TOKEN. Registration is the SDK's: it retries every
 * 200 ms while the registry is unreachable (and, as the SDK does, also after an UNREACHABLE
 * refusal), checks with the SDK's heartbeat (default every 2 s, `--heartbeat-ms` to change it) that
 * the registry still has the engine and registers again when it lost it, and deregisters on
 * SIGTERM/SIGINT. (The Python engine registers once and has no heartbeat.)
 *
 * Behaviour is read from the JSON control FILE on every call; see test/helpers/engine-process.ts.
 * Health: the SDK serves grpc.health.v1; this engine's Check follows the control file's `health`
 * (read on every Check). GetInfo (answered by the SDK) follows `get_info`. Both, and the
 * `garbage_bytes` mode of every RPC, are implemented by wrapping the services the SDK adds to its
 * grpc-js Server (below), since the SDK normalises every answer an engine method returns.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Server, status, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { refusalToJSON } from "../../../src/contract/gen/contextd/v1/registry.js";
import { ContextProjection_Mode, subagentEndReasonToJSON } from "../../../src/contract/gen/contextd/v1/types.js";
import {
  delegateCompactionToHost,
  isSummaryMessage,
  keepMessages,
  PromptAuthority,
  RegistrationError,
  Role,
  serveEngine,
  textMessage,
  toolCallIds,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type ContextEngineServiceMaintainResponse,
  type EngineCallContext,
  type EngineDefinition,
  type HostContext,
  type Message,
  type SessionRef,
} from "../../../src/sdk/engine-sdk.js";

type Op = "assemble" | "compact" | "ingest" | "bootstrap" | "after_turn" | "maintain" | "subagent" | "forget" | "get_info";
const MODE_NAMES = [
  "ok",
  "hang",
  "ignore_cancel",
  "crash",
  "crash_after",
  "throw",
  "garbage",
  "garbage_bytes",
  "slow",
  "late",
  "over_budget",
  "unknown_entry",
  "by_reference",
  "reference_unknown",
  "reference_twice",
  "reference_order",
  "huge",
  "hostile_text",
  "projection",
  "projection_bad",
] as const;
type Mode = (typeof MODE_NAMES)[number];
const MODES = new Set<string>(MODE_NAMES);
const HEALTH_MODES = new Set<string>(["SERVING", "NOT_SERVING", "hang", "slow", "throw", "garbage_bytes", "crash"]);
const ENGINE_SERVICE = "contextd.v1.ContextEngineService";
const CAPABILITIES = ["bootstrap", "ingest_batch", "after_turn", "maintain", "subagents", "forget"] as const;

/** Bytes no protobuf message decodes from: field 1 with wire type 7, which does not exist. */
const GARBAGE_BYTES = Buffer.from([0x0f, 0xff, 0xff]);
/** Handed to grpc-js as a response; the wrapped serializer turns it into GARBAGE_BYTES. */
const GARBAGE = Symbol("garbage bytes");

type ControlFile = Partial<Record<Op, string>> & {
  health?: string;
  leak_host_token_to?: string;
  ignore_cancel_ms?: number;
  huge_bytes?: number;
  hostile_bytes?: number;
  slow_ms?: number;
  late_ms?: number;
};

const { values: args } = parseArgs({
  options: {
    "engine-id": { type: "string" },
    control: { type: "string" },
    listen: { type: "string", default: "127.0.0.1:0" },
    registry: { type: "string" },
    owner: { type: "string" },
    "owns-compaction": { type: "boolean", default: false },
    "parent-pid": { type: "string" },
    "heartbeat-ms": { type: "string" },
    capabilities: { type: "string", default: "" },
  },
  strict: true,
});

const engineId = args["engine-id"];
const controlPath = args.control;
if (!engineId || !controlPath) {
  process.stderr.write("usage: misbehaving-engine --engine-id ID --control FILE [--listen ADDR] [--registry ADDR --owner OWNER] [--owns-compaction]\n");
  process.exit(2);
}
if (args.registry && !args.owner) {
  process.stderr.write("--registry needs --owner\n");
  process.exit(2);
}
const ownsCompaction = args["owns-compaction"] ?? false;
const capabilityList =
  args.capabilities === "all"
    ? [...CAPABILITIES]
    : (args.capabilities ?? "")
        .split(",")
        .map((c) => c.trim())
        .filter(Boolean);
for (const c of capabilityList) {
  if (!(CAPABILITIES as readonly string[]).includes(c)) {
    process.stderr.write(`unknown capability "${c}" (known: ${CAPABILITIES.join(", ")}, or all)\n`);
    process.exit(2);
  }
}
const capabilities = new Set<string>(capabilityList);

/** One JSON line on stdout (synchronous for pipes on Linux, so it is out before a crash). */
function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function readControl(): ControlFile {
  try {
    const data: unknown = JSON.parse(readFileSync(controlPath!, "utf8"));
    return typeof data === "object" && data !== null && !Array.isArray(data) ? (data as ControlFile) : {};
  } catch {
    return {};
  }
}

function modeOf(control: ControlFile, op: Op): Mode {
  const value = control[op] ?? "ok";
  return (MODES.has(value) ? value : "ok") as Mode;
}

function msSetting(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : fallback;
}

/** `answered`, or `answered_late` when the call had already ended (the answer goes nowhere). */
function answered(op: Op, mode: Mode, ctx: EngineCallContext): void {
  emit({ event: ctx.signal.aborted || Date.now() >= ctx.deadlineMs ? "answered_late" : "answered", op, mode });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves true when the call is cancelled / out of time, false when `ms` passed first (never, without `ms`). */
function untilCancelled(op: Op, ctx: EngineCallContext, ms?: number): Promise<boolean> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      if (timer) clearTimeout(timer);
      const reason = (ctx.signal.reason as Error | undefined)?.name === "TimeoutError" ? "deadline" : "cancelled";
      emit({ event: "cancelled", op, reason });
      resolve(true);
    };
    if (ctx.signal.aborted) return onAbort();
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    if (ms !== undefined) {
      timer = setTimeout(() => {
        ctx.signal.removeEventListener("abort", onAbort);
        resolve(false);
      }, ms);
    }
  });
}

/**
 * Runs the control file's mode for `op`. `garbage` is the op's contract-breaking answer (over the
 * budget, an unknown entry, ...); without one, the garbage modes answer as "ok" would.
 * ("garbage_bytes" never gets here: the wire wrapper below answers it.)
 */
type GarbageMode =
  | "garbage"
  | "over_budget"
  | "unknown_entry"
  | "by_reference"
  | "reference_unknown"
  | "reference_twice"
  | "reference_order"
  | "huge"
  | "hostile_text"
  | "projection"
  | "projection_bad";

/** `hostile_bytes` characters (default 1 MB) of terminal escapes, a bell and a right-to-left override. */
function hostileText(control: { hostile_bytes?: unknown }): string {
  const unit = "\u001b[8m\u0007\u202ehidden";
  const n = msSetting(control.hostile_bytes, 1_000_000);
  return unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
}
async function misbehave<T>(
  op: Op,
  ctx: EngineCallContext,
  ok: () => T | Promise<T>,
  garbage?: (mode: GarbageMode) => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const control = readControl();
  const mode = modeOf(control, op);
  emit({ event: "call", op, mode });
  switch (mode) {
    case "hang":
      await untilCancelled(op, ctx);
      // The SDK has already answered CANCELLED / DEADLINE_EXCEEDED; this goes nowhere.
      throw ctx.signal.reason;
    case "ignore_cancel": {
      await sleep(msSetting(control.ignore_cancel_ms, 30_000));
      const res = await ok();
      answered(op, mode, ctx);
      return res;
    }
    case "crash":
      process.exit(3);
    // eslint-disable-next-line no-fallthrough -- process.exit() never returns
    case "crash_after":
      // Does the work ("ok": a delegating Compact has the host commit), then dies before answering.
      await ok();
      emit({ event: "crashing_after", op });
      process.exit(3);
    // eslint-disable-next-line no-fallthrough -- process.exit() never returns
    case "throw":
      throw new Error("misbehaving engine: told to throw");
    case "hostile_text":
      // Assemble and Compact answer with hostile text; every other op fails with it as its error.
      if (op === "assemble" || op === "compact") return (await garbage?.(mode)) ?? ok();
      throw new Error(hostileText(control));
    case "huge":
    case "garbage":
    case "over_budget":
    case "unknown_entry":
    case "by_reference":
    case "reference_unknown":
    case "reference_twice":
    case "reference_order":
    case "projection":
    case "projection_bad":
      return (await garbage?.(mode)) ?? ok();
    case "late": {
      // Ignores cancellation and answers after the call's deadline: the answer goes nowhere.
      const at = Number.isFinite(ctx.deadlineMs) ? ctx.deadlineMs + msSetting(control.late_ms, 200) : Date.now();
      await sleep(Math.max(0, at - Date.now()));
      const res = await ok();
      answered(op, mode, ctx);
      return res;
    }
    case "slow": {
      if (await untilCancelled(op, ctx, msSetting(control.slow_ms, 300))) throw ctx.signal.reason;
      const res = await ok();
      answered(op, mode, ctx);
      return res;
    }
    default:
      return ok();
  }
}

function sumTokens(messages: Message[]): number {
  return messages.reduce((sum, m) => sum + m.tokenCount, 0);
}

/**
 * The newest messages that fit `budget` (undefined: all), oldest first. A tool result joins the
 * group of the message that made its call (and everything in between); groups are kept or dropped
 * whole, and the answer never starts with a tool result.
 */
export function newestThatFit(messages: Message[], budget: number | undefined): Message[] {
  let kept: Message[];
  if (budget === undefined) {
    kept = [...messages];
  } else {
    const groups: Message[][] = [];
    const groupOfCall = new Map<string, number>();
    for (const m of messages) {
      const idx = m.role === Role.ROLE_TOOL_RESULT && m.toolCallId ? groupOfCall.get(m.toolCallId) : undefined;
      if (idx !== undefined) {
        const merged = [...groups.splice(idx).flat(), m];
        groups.push(merged);
        for (const x of merged) for (const id of toolCallIds(x)) groupOfCall.set(id, idx);
      } else {
        groups.push([m]);
        for (const id of toolCallIds(m)) groupOfCall.set(id, groups.length - 1);
      }
    }
    kept = [];
    let used = 0;
    for (let i = groups.length - 1; i >= 0; i--) {
      const t = sumTokens(groups[i]!);
      if (used + t > budget) break;
      kept.unshift(...groups[i]!);
      used += t;
    }
  }
  while (kept[0]?.role === Role.ROLE_TOOL_RESULT) kept.shift();
  return kept;
}

/** The debugging hook: write the call's HostContext where the control file says. */
function leakHost(op: Op, req: { host?: HostContext; session?: SessionRef }): void {
  const path = readControl().leak_host_token_to;
  if (!path || !req.host) return;
  const data = {
    op,
    endpoint: req.host.endpoint,
    token: req.host.token,
    expires_at_ms: req.host.expiresAtMs,
    session_id: req.session?.sessionId ?? "",
    session: { session_id: req.session?.sessionId ?? "", session_key: req.session?.sessionKey ?? "", agent_id: req.session?.agentId ?? "" },
  };
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    writeFileSync(tmp, JSON.stringify(data));
    renameSync(tmp, path);
  } catch (err) {
    process.stderr.write(`[misbehaving-engine] cannot write leak_host_token_to ${path}: ${String(err)}\n`);
  }
}

function ownCompaction(req: ContextEngineServiceCompactRequest): Partial<ContextEngineServiceCompactResponse> {
  const messages = req.messages;
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    // The previous compaction's summary is a user message too, but not an entry one can keep from.
    if (messages[i]!.role === Role.ROLE_USER && !isSummaryMessage(messages[i]!)) {
      lastUser = i;
      break;
    }
  }
  if (lastUser < 0) return { ok: true, compacted: false, reason: "no user message to keep from" };
  return {
    ok: true,
    compacted: true,
    reason: "misbehaving engine: compacted",
    result: {
      summary: "test summary",
      firstKeptEntryId: messages[lastUser]!.id,
      tokensBefore: req.currentTokenCount || sumTokens(messages),
      tokensAfter: sumTokens(messages.slice(lastUser)) + 3,
      details: undefined,
    },
  };
}

// --- the wire: health, GetInfo and garbage bytes ---------------------------------------------------
// serveEngine builds its own grpc-js Server and adds the engine service and grpc-health-check's
// service to it; wrap both before they are added, so that every Check, every GetInfo and every
// "garbage_bytes" answer follows the control file.
type AddService = (service: ServiceDefinition, impl: UntypedServiceImplementation) => void;
type UnaryHandler = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => void;
const serverProto = Server.prototype as unknown as { addService: AddService };
const originalAddService = serverProto.addService;

/** The control-file op of each ContextEngineService method (as the generated service keys them). */
const OP_OF_METHOD: Record<string, Op> = {
  getInfo: "get_info",
  bootstrap: "bootstrap",
  ingest: "ingest",
  ingestBatch: "ingest",
  assemble: "assemble",
  compact: "compact",
  afterTurn: "after_turn",
  maintain: "maintain",
  prepareSubagentSpawn: "subagent",
  rollbackSubagentSpawn: "subagent",
  onSubagentEnded: "subagent",
  forgetSession: "forget",
};

function deadlineOf(call: ServerUnaryCall<unknown, unknown>): number {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : Number(d);
  return Number.isFinite(ms) ? ms : Number.POSITIVE_INFINITY;
}

/** Resolves when the call is cancelled or its deadline passes (grpc-js emits "cancelled" for both). */
function callEnded(call: ServerUnaryCall<unknown, unknown>): Promise<void> {
  return new Promise((resolve) => {
    if (call.cancelled) return resolve();
    call.once("cancelled", () => resolve());
  });
}

/** Serializers that let a handler answer GARBAGE, which goes out as GARBAGE_BYTES. */
function garbageCapable(service: ServiceDefinition): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(service as Record<string, { responseSerialize: (v: unknown) => Buffer }>)) {
    out[name] = { ...def, responseSerialize: (v: unknown) => (v === GARBAGE ? GARBAGE_BYTES : def.responseSerialize(v)) };
  }
  return out as unknown as ServiceDefinition;
}

/** GetInfo, which the SDK answers itself, misbehaving as the control file's `get_info` says. */
function misbehavingGetInfo(getInfo: UnaryHandler): UnaryHandler {
  return (call, callback) => {
    const control = readControl();
    const mode = modeOf(control, "get_info");
    if (mode === "ok") return getInfo(call, callback);
    emit({ event: "call", op: "get_info", mode });
    switch (mode) {
      case "garbage_bytes":
        return callback(null, GARBAGE);
      case "hang":
        void callEnded(call).then(() => emit({ event: "cancelled", op: "get_info", reason: Date.now() >= deadlineOf(call) - 5 ? "deadline" : "cancelled" }));
        return;
      case "crash":
        process.exit(3);
      // eslint-disable-next-line no-fallthrough -- process.exit() never returns
      case "throw":
        return callback({ code: status.INTERNAL, details: "misbehaving engine: told to throw" }, null);
      case "slow":
      case "ignore_cancel":
      case "late": {
        const waitMs =
          mode === "slow"
            ? msSetting(control.slow_ms, 300)
            : mode === "ignore_cancel"
              ? msSetting(control.ignore_cancel_ms, 30_000)
              : Math.max(0, deadlineOf(call) + msSetting(control.late_ms, 200) - Date.now());
        setTimeout(
          () => {
            emit({ event: call.cancelled ? "answered_late" : "answered", op: "get_info", mode });
            getInfo(call, callback);
          },
          Number.isFinite(waitMs) ? waitMs : 0,
        );
        return;
      }
      default:
        return getInfo(call, callback);
    }
  };
}

/** Every other engine RPC: "garbage_bytes" answers bytes that are no protobuf message. */
function garbageOr(name: string, handler: UnaryHandler): UnaryHandler {
  const op = OP_OF_METHOD[name];
  if (!op) return handler;
  return (call, callback) => {
    if (modeOf(readControl(), op) !== "garbage_bytes") return handler(call, callback);
    emit({ event: "call", op, mode: "garbage_bytes" });
    callback(null, GARBAGE);
  };
}

/** grpc.health.v1 Check as the control file's `health` says (SERVING when unset). */
function misbehavingCheck(check: UnaryHandler): UnaryHandler {
  return (call, callback) => {
    const name = (call.request as { service: string }).service;
    if (name !== "" && name !== ENGINE_SERVICE) return check(call, callback);
    const control = readControl();
    const mode = control.health && HEALTH_MODES.has(control.health) ? control.health : "SERVING";
    switch (mode) {
      case "NOT_SERVING":
        return callback(null, { status: "NOT_SERVING" });
      case "hang":
        return; // never answers; the caller's deadline ends the call
      case "slow":
        setTimeout(() => check(call, callback), msSetting(control.slow_ms, 300));
        return;
      case "throw":
        return callback({ code: status.INTERNAL, details: "misbehaving engine: health told to throw" }, null);
      case "garbage_bytes":
        return callback(null, GARBAGE);
      case "crash":
        emit({ event: "call", op: "health", mode });
        process.exit(3);
      // eslint-disable-next-line no-fallthrough -- process.exit() never returns
      default:
        return check(call, callback);
    }
  };
}

serverProto.addService = function (this: Server, service: ServiceDefinition, impl: UntypedServiceImplementation) {
  // proto-loader and ts-proto key methods differently ("Check" / "getInfo"); match on the paths.
  const paths = Object.values(service as Record<string, { path?: string } | undefined>).map((m) => m?.path ?? "");
  if (paths.includes("/grpc.health.v1.Health/Check")) {
    const wrapped: UntypedServiceImplementation = { ...impl };
    // grpc-js finds a handler under the method's name or its originalName ("Check" / "check").
    for (const [name, def] of Object.entries(service as Record<string, { path?: string; originalName?: string }>)) {
      if (def.path !== "/grpc.health.v1.Health/Check") continue;
      for (const key of [name, def.originalName ?? name]) {
        if (typeof impl[key] === "function") wrapped[key] = misbehavingCheck(impl[key] as UnaryHandler);
      }
    }
    return originalAddService.call(this, garbageCapable(service), wrapped);
  }
  if (paths.some((p) => p.startsWith(`/${ENGINE_SERVICE}/`))) {
    const wrapped: UntypedServiceImplementation = {};
    for (const [name, handler] of Object.entries(impl)) {
      wrapped[name] = name === "getInfo" ? misbehavingGetInfo(handler as UnaryHandler) : garbageOr(name, handler as UnaryHandler);
    }
    return originalAddService.call(this, garbageCapable(service), wrapped);
  }
  originalAddService.call(this, service, impl);
};

// --- the engine -------------------------------------------------------------------------------------

/** The optional RPCs, each only with its capability (the SDK derives capabilities from them). */
const optional: Partial<EngineDefinition> = {};
if (capabilities.has("bootstrap")) {
  optional.bootstrap = (_req, ctx) =>
    misbehave("bootstrap", ctx, () => ({ bootstrapped: true, importedMessages: 0, reason: "misbehaving engine: bootstrapped" }));
}
if (capabilities.has("ingest_batch")) {
  optional.ingestBatch = (req, ctx) =>
    misbehave(
      "ingest",
      ctx,
      () => ({ ingestedCount: req.messages.length }),
      () => ({ ingestedCount: req.messages.length + 1000 }),
    );
}
if (capabilities.has("after_turn")) {
  optional.afterTurn = (req, ctx) => {
    emit({ event: "after_turn_request", prompt_cache: req.runtimeSettings?.promptCache ?? null });
    return misbehave("after_turn", ctx, () => ({}));
  };
}
if (capabilities.has("maintain")) {
  optional.maintain = (req, ctx) =>
    misbehave<Partial<ContextEngineServiceMaintainResponse>>(
      "maintain",
      ctx,
      () => ({ changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "misbehaving engine: nothing to do" }),
      async (mode) => {
        if (mode !== "unknown_entry" || !ctx.host) return undefined;
        // Asks the host to rewrite an entry the session does not have; the host's refusal propagates.
        const res = await ctx.host.rewriteTranscriptEntries({
          session: req.session,
          rewrites: [{ entryId: "no-such-entry", message: textMessage(Role.ROLE_USER, "rewritten") }],
          reason: "misbehaving engine: unknown entry",
        });
        return { changed: true, bytesFreed: Number(res.bytesFreed), rewrittenEntries: res.rewrittenEntries, reason: "misbehaving engine: rewrote" };
      },
    );
}
if (capabilities.has("subagents")) {
  optional.prepareSubagentSpawn = (req, ctx) => misbehave("subagent", ctx, () => ({ rollbackHandle: `mb-${req.child?.sessionId ?? ""}` }));
  optional.rollbackSubagentSpawn = (_req, ctx) => misbehave("subagent", ctx, () => ({}));
  optional.onSubagentEnded = (req, ctx) =>
    misbehave("subagent", ctx, () => {
      emit({ event: "subagent_ended", session_id: req.child?.sessionId ?? "", reason: subagentEndReasonToJSON(req.reason) });
      return {};
    });
}
if (capabilities.has("forget")) {
  optional.forgetSession = (req, ctx) =>
    misbehave("forget", ctx, () => {
      emit({ event: "forgotten", session_id: req.session?.sessionId ?? "", reason: req.reason, deleted_at_ms: req.deletedAtMs });
      return { purged: true };
    });
}

const engine = await serveEngine(
  {
    // Declares every host requirement it may call on: contextd refuses undeclared HostService RPCs,
    // and tests also call them with the tokens this engine leaks (leak_host_token_to).
    info: {
      id: engineId,
      name: "Misbehaving test engine",
      version: "1.0.0",
      ownsCompaction,
      hostRequirements: ["host-compaction", "transcript-rewrite", "llm-complete"],
    },
    ...optional,

    ingest(_req, ctx) {
      return misbehave<{ ingested: boolean }>(
        "ingest",
        ctx,
        () => ({ ingested: true }),
        () => ({ ingested: false }),
      );
    },

    assemble(req: ContextEngineServiceAssembleRequest, ctx) {
      leakHost("assemble", req);
      emit({ event: "assemble_request", prompt: req.prompt, messages: req.messages.length, prompt_cache: req.runtimeSettings?.promptCache ?? null });
      const budget = req.tokenBudget;
      const ok = () => {
        const kept = newestThatFit(req.messages, budget);
        return { messages: kept, estimatedTokens: sumTokens(kept), promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
      };
      return misbehave<Partial<ContextEngineServiceAssembleResponse>>("assemble", ctx, ok, (mode) => {
        if (mode === "huge") {
          // "ok"'s answer and one message of `huge_bytes` (40 MB) of text after it.
          const n = msSetting(readControl().huge_bytes, 40_000_000);
          const huge = textMessage(Role.ROLE_USER, "a".repeat(n), { tokenCount: 1 });
          return { ...ok(), messages: [...ok().messages, huge] };
        }
        if (mode === "projection" || mode === "projection_bad") {
          // "ok"'s answer for a runtime with a backend thread; "projection_bad" leaves out the required epoch.
          const projection = { mode: ContextProjection_Mode.MODE_THREAD_BOOTSTRAP, epoch: mode === "projection" ? "epoch-1" : "", fingerprint: "fp-1" };
          return { ...ok(), contextProjection: projection };
        }
        if (mode === "hostile_text") {
          // Answered by reference, naming an id of `hostile_bytes` terminal escapes the view does not have.
          return { messages: [], keptEntryIds: [hostileText(readControl())], promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
        }
        if (mode === "by_reference" || mode.startsWith("reference_")) {
          // "ok"'s choice answered by id (kept_entry_ids), after a note of the engine's own.
          const note = textMessage(Role.ROLE_USER, "a note the engine adds", { tokenCount: 6 });
          const kept = newestThatFit(req.messages, budget === undefined ? undefined : Math.max(0, budget - 50));
          const answer = keepMessages(req, [note, ...kept]);
          const ids = answer.keptEntryIds;
          if (mode === "reference_unknown") ids.push("no-such-entry");
          if (mode === "reference_twice" && ids.length) ids.push(ids[ids.length - 1]!);
          if (mode === "reference_order" && ids.length > 1) ids.reverse();
          return { ...answer, estimatedTokens: sumTokens(kept) + 6, promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
        }
        if (mode === "unknown_entry") {
          // A message of the engine's own making, under an id the session does not have.
          const made = textMessage(Role.ROLE_ASSISTANT, "recalled by the engine", { id: "no-such-entry", tokenCount: 5 });
          const kept = newestThatFit(req.messages, budget === undefined ? undefined : Math.max(0, budget - 50));
          return { messages: [made, ...kept], estimatedTokens: sumTokens(kept) + 5, promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
        }
        const padding = textMessage(Role.ROLE_USER, "padding ".repeat((budget ?? 0) + 1000), { id: "garbage-padding", tokenCount: (budget ?? 0) + 1000 });
        const messages = [...req.messages, padding];
        return { messages, estimatedTokens: sumTokens(messages), promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
      });
    },

    compact(req: ContextEngineServiceCompactRequest, ctx) {
      leakHost("compact", req);
      return misbehave<Partial<ContextEngineServiceCompactResponse>>(
        "compact",
        ctx,
        () => (ownsCompaction ? ownCompaction(req) : delegateCompactionToHost(req, ctx)),
        (mode) =>
          mode === "over_budget"
            ? undefined
            : mode === "hostile_text"
              ? { ok: false, compacted: false, reason: hostileText(readControl()), result: undefined }
              : mode === "huge"
                ? {
                    ok: true,
                    compacted: true,
                    reason: "a huge summary",
                    result: {
                      summary: "s".repeat(msSetting(readControl().huge_bytes, 40_000_000)),
                      firstKeptEntryId: "",
                      tokensBefore: req.currentTokenCount || sumTokens(req.messages),
                      tokensAfter: 1,
                      details: undefined,
                    },
                  }
                : {
                    ok: true,
                    compacted: true,
                    reason: "misbehaving engine: garbage",
                    result: {
                      summary: "garbage summary",
                      firstKeptEntryId: "no-such-entry",
                      tokensBefore: req.currentTokenCount || sumTokens(req.messages),
                      tokensAfter: 1,
                      details: undefined,
                    },
                  },
      );
    },
  },
  {
    registry: args.registry ?? "",
    owner: args.owner,
    ownerToken: process.env.CONTEXTD_OWNER_TOKEN,
    listen: args.listen,
    allowSameOwnerRefresh: true,
    retry: { initialMs: 200, maxMs: 200 },
    heartbeatMs: args["heartbeat-ms"] ? Number(args["heartbeat-ms"]) : undefined,
    drainTimeoutMs: 500,
    handleSignals: false,
  },
);

emit({ event: "listening", address: engine.address, pid: process.pid });

if (args.registry) {
  engine.registered.then(
    (res) =>
      emit({
        event: "registered",
        ok: res?.ok ?? false,
        refusal: res ? refusalToJSON(res.refusal) : "",
        message: res?.message ?? "",
        existing_owner: res?.existingOwner ?? "",
        protocol_version: res?.protocolVersion ?? 0,
      }),
    (err: unknown) => {
      const e = err instanceof RegistrationError ? err : undefined;
      emit({
        event: "registered",
        ok: false,
        refusal: e?.refusal !== undefined ? refusalToJSON(e.refusal) : e?.code !== undefined ? statusName(e.code) : "ERROR",
        message: e?.response?.message || (err instanceof Error ? err.message : String(err)),
        existing_owner: e?.response?.existingOwner ?? "",
      });
    },
  );
}

function statusName(code: number): string {
  return (status as unknown as Record<number, string | undefined>)[code] ?? String(code);
}

// SIGTERM / SIGINT: deregister (SDK), drain briefly, exit 0. Calls stuck in ignore_cancel do not
// hold the exit.
let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    emit({ event: "stopping", signal });
    const hardExit = setTimeout(() => process.exit(0), 2_000);
    void engine.stop().finally(() => {
      clearTimeout(hardExit);
      process.exit(0);
    });
  });
}

// Exit when the process that started us is gone, so a killed test run leaves no engines behind.
const parentPid = args["parent-pid"] ? Number(args["parent-pid"]) : undefined;
if (parentPid) {
  setInterval(() => {
    if (process.ppid !== parentPid) process.exit(0);
  }, 500).unref();
}
