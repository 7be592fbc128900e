/**
 * A contextd context engine built on the engine SDK (`serveEngine`) that can be told to misbehave,
 * for registry / quarantine / fallback tests. The TypeScript twin of
 * test/engines/python/misbehaving_engine.py: same CLI, same control file, same stdout lines.
 *
 *   node misbehaving-engine.js --engine-id ID --control FILE [--listen 127.0.0.1:0]
 *        [--registry ADDR --owner OWNER] [--owns-compaction] [--parent-pid PID] [--heartbeat-ms N]
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
 * Health: the SDK serves grpc.health.v1; this engine answers NOT_SERVING from Check whenever the
 * control file says `"health": "NOT_SERVING"` (read on every Check).
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Server, status, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { refusalToJSON } from "../../../src/contract/gen/contextd/v1/registry.js";
import {
  delegateCompactionToHost,
  PromptAuthority,
  RegistrationError,
  Role,
  serveEngine,
  textMessage,
  toolCallIds,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type EngineCallContext,
  type HostContext,
  type Message,
  type SessionRef,
} from "../../../src/sdk/engine-sdk.js";

type Mode = "ok" | "hang" | "ignore_cancel" | "crash" | "throw" | "garbage" | "slow";
type Op = "assemble" | "compact" | "ingest";
const MODES = new Set<string>(["ok", "hang", "ignore_cancel", "crash", "throw", "garbage", "slow"]);
const ENGINE_SERVICE = "contextd.v1.ContextEngineService";

interface ControlFile {
  assemble?: string;
  compact?: string;
  ingest?: string;
  health?: string;
  leak_host_token_to?: string;
  ignore_cancel_ms?: number;
  slow_ms?: number;
}

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

/** Runs the control file's mode for `op`. */
async function misbehave<T>(op: Op, ctx: EngineCallContext, ok: () => T | Promise<T>, garbage: () => T): Promise<T> {
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
    // eslint-disable-next-line no-fallthrough
    case "throw":
      throw new Error("misbehaving engine: told to throw");
    case "garbage":
      return garbage();
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
    if (messages[i]!.role === Role.ROLE_USER) {
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

// --- health: the control file's "health" wins over the SDK's SERVING ------------------------------
// serveEngine builds its own grpc-js Server and adds grpc-health-check's service to it; wrap that
// service's Check before it is added so that every Check reads the control file.
type AddService = (service: ServiceDefinition, impl: UntypedServiceImplementation) => void;
const serverProto = Server.prototype as unknown as { addService: AddService };
const originalAddService = serverProto.addService;
serverProto.addService = function (this: Server, service: ServiceDefinition, impl: UntypedServiceImplementation) {
  // proto-loader keys methods by their proto name ("Check"); match on the path to be safe.
  const isHealth = Object.values(service as Record<string, { path?: string } | undefined>).some((m) => m?.path === "/grpc.health.v1.Health/Check");
  const check = impl.check as ((call: ServerUnaryCall<{ service: string }, unknown>, cb: sendUnaryData<unknown>) => void) | undefined;
  if (isHealth && typeof check === "function") {
    impl = {
      ...impl,
      check: (call: ServerUnaryCall<{ service: string }, unknown>, callback: sendUnaryData<unknown>) => {
        check(call, (err, res) => {
          const name = call.request.service;
          if (!err && (name === "" || name === ENGINE_SERVICE) && readControl().health === "NOT_SERVING") {
            callback(null, { status: "NOT_SERVING" });
            return;
          }
          callback(err, res);
        });
      },
    };
  }
  originalAddService.call(this, service, impl);
};

// --- the engine -------------------------------------------------------------------------------------

const engine = await serveEngine(
  {
    info: { id: engineId, name: "Misbehaving test engine", version: "1.0.0", ownsCompaction },

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
      const budget = req.tokenBudget;
      return misbehave(
        "assemble",
        ctx,
        () => {
          const kept = newestThatFit(req.messages, budget);
          return { messages: kept, estimatedTokens: sumTokens(kept), promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
        },
        () => {
          const padding = textMessage(Role.ROLE_USER, "padding ".repeat((budget ?? 0) + 1000), { id: "garbage-padding", tokenCount: (budget ?? 0) + 1000 });
          const messages = [...req.messages, padding];
          return { messages, estimatedTokens: sumTokens(messages), promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
        },
      );
    },

    compact(req: ContextEngineServiceCompactRequest, ctx) {
      leakHost("compact", req);
      return misbehave<Partial<ContextEngineServiceCompactResponse>>(
        "compact",
        ctx,
        () => (ownsCompaction ? ownCompaction(req) : delegateCompactionToHost(req, ctx)),
        () => ({
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
        }),
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
    engine.stop().finally(() => {
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
