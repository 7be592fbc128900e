import type { Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { PROTOCOL_VERSION } from "../../contract/engine-api.js";
import { LEGACY_ENGINE_ID } from "../../contract/engine-id.js";
import {
  EngineInfo,
  TurnMaintenanceMode,
  type BootstrapRequest,
  type BootstrapResponse,
  type ContextEngineServiceAfterTurnRequest,
  type ContextEngineServiceAfterTurnResponse,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type ContextEngineServiceMaintainRequest,
  type ContextEngineServiceMaintainResponse,
  type ContextEngineServicePrepareSubagentSpawnRequest,
  type ContextEngineServicePrepareSubagentSpawnResponse,
  type ContextEngineServiceRollbackSubagentSpawnRequest,
  type ContextEngineServiceRollbackSubagentSpawnResponse,
  type DeepPartial,
  type DisposeRequest,
  type DisposeResponse,
  type ForgetSessionRequest,
  type ForgetSessionResponse,
  type EngineCapabilities,
  type IngestBatchRequest,
  type IngestBatchResponse,
  type IngestRequest,
  type IngestResponse,
  type OnSubagentEndedRequest,
  type OnSubagentEndedResponse,
} from "../../contract/gen/contextd/v1/engine.js";
import { delegateCompactionToHost } from "./delegate-compaction.js";
import type { HostClient } from "./host-client.js";

export type Awaitable<T> = T | Promise<T>;

/**
 * What an engine method returns: a partial response (unset fields take their proto defaults; the
 * SDK normalises it with `fromPartial`), directly or as a promise.
 */
export type Reply<T> = Awaitable<DeepPartial<T>>;

/** For RPCs whose response has no fields: returning nothing is fine. */
export type EmptyReply<T> = Awaitable<DeepPartial<T> | void>;

/** Host capabilities an engine may need (EngineInfo.host_requirements). Other strings pass through. */
export type HostRequirement = "assemble-before-prompt" | "host-compaction" | "llm-complete" | "transcript-rewrite" | (string & {});

/** The static part of EngineInfo. Capabilities and protocol versions are derived by the SDK. */
export interface EngineInfoInput {
  /** The engine id it registers under. Non-empty; `legacy` is reserved for contextd's built-in engine. */
  id: string;
  /** Human-readable name. Non-empty. */
  name: string;
  version?: string;
  /**
   * True when the engine manages its own budget and compaction; the host then never compacts
   * natively before Assemble (unless Assemble answers PREASSEMBLY_MAY_OVERFLOW). Default false.
   */
  ownsCompaction?: boolean;
  /** Default FOREGROUND. */
  turnMaintenanceMode?: TurnMaintenanceMode | "foreground" | "background";
  /**
   * The HostService RPCs the engine calls, which contextd refuses (PERMISSION_DENIED) to an engine
   * that did not declare them: `transcript-rewrite` for RewriteTranscriptEntries, `host-compaction`
   * for DelegateCompaction, `llm-complete` for Complete (ReadTranscript needs none). With
   * `compact: delegateCompactionToHost` the SDK adds `host-compaction` itself.
   */
  hostRequirements?: HostRequirement[];
}

/** What every engine method gets besides its request. */
export interface EngineCallContext {
  /**
   * Fires when the caller cancels the call or its deadline passes (reason: a DOMException named
   * `AbortError` or `TimeoutError`). Stop work when it fires: whatever the method returns afterwards
   * is dropped. Pass it on to fetch, host calls, child processes.
   */
  signal: AbortSignal;
  /** The caller's deadline as epoch milliseconds; Infinity when the caller set none. */
  deadlineMs: number;
  /**
   * Calls back into the host (HostService) with this call's HostContext credentials and deadline.
   * Set only when the request carried a HostContext (Bootstrap, Ingest, IngestBatch, Assemble,
   * Compact, AfterTurn, Maintain, PrepareSubagentSpawn).
   */
  host?: HostClient;
  /** A pino child logger with the engine id, the RPC name and the request id. */
  log: Logger;
  /** The RPC being served, e.g. `Assemble`. */
  method: string;
  /** The incoming gRPC metadata. */
  metadata: Metadata;
}

/**
 * A context engine as a plain object (or class instance). `info`, `assemble` and `compact` are
 * required; every other method is optional, and which ones exist decides `EngineInfo.capabilities`:
 *
 * | method(s)                                                         | capability     |
 * |-------------------------------------------------------------------|----------------|
 * | `bootstrap`                                                       | `bootstrap`    |
 * | `ingestBatch`                                                     | `ingest_batch` |
 * | `afterTurn`                                                       | `after_turn`   |
 * | `maintain`                                                        | `maintain`     |
 * | any of `prepareSubagentSpawn`, `rollbackSubagentSpawn`, `onSubagentEnded` | `subagents` |
 * | `dispose`                                                         | `dispose`      |
 * | `forgetSession`                                                   | `forget`       |
 *
 * An optional RPC the engine does not implement answers UNIMPLEMENTED. Within `subagents`, a
 * missing one of the three answers an empty response (nothing to prepare, roll back or release).
 * `ingest` may be omitted: the host has already stored the message, so the default answers
 * `{ ingested: true }` (as the built-in `legacy` engine does).
 *
 * Errors: throw a `ContextdError` (e.g. `new FailedPreconditionError(...)`) to answer with its gRPC
 * status; an abort (AbortError/TimeoutError) answers CANCELLED/DEADLINE_EXCEEDED; anything else
 * answers INTERNAL with the error's message. Note that the registry quarantines an engine on
 * errors, so answer errors only when the call really failed.
 */
export interface EngineDefinition {
  info: EngineInfoInput;
  ingest?(req: IngestRequest, ctx: EngineCallContext): Reply<IngestResponse>;
  /**
   * Builds what the model sees, within `req.tokenBudget` (when set). `estimatedTokens` defaults to
   * the sum of the returned messages' `tokenCount`.
   */
  assemble(req: ContextEngineServiceAssembleRequest, ctx: EngineCallContext): Reply<ContextEngineServiceAssembleResponse>;
  /**
   * Compacts the session. An engine that does not own compaction should delegate to the host:
   * `compact: delegateCompactionToHost`.
   */
  compact(req: ContextEngineServiceCompactRequest, ctx: EngineCallContext): Reply<ContextEngineServiceCompactResponse>;
  bootstrap?(req: BootstrapRequest, ctx: EngineCallContext): Reply<BootstrapResponse>;
  ingestBatch?(req: IngestBatchRequest, ctx: EngineCallContext): Reply<IngestBatchResponse>;
  afterTurn?(req: ContextEngineServiceAfterTurnRequest, ctx: EngineCallContext): EmptyReply<ContextEngineServiceAfterTurnResponse>;
  maintain?(req: ContextEngineServiceMaintainRequest, ctx: EngineCallContext): Reply<ContextEngineServiceMaintainResponse>;
  prepareSubagentSpawn?(req: ContextEngineServicePrepareSubagentSpawnRequest, ctx: EngineCallContext): Reply<ContextEngineServicePrepareSubagentSpawnResponse>;
  rollbackSubagentSpawn?(
    req: ContextEngineServiceRollbackSubagentSpawnRequest,
    ctx: EngineCallContext,
  ): EmptyReply<ContextEngineServiceRollbackSubagentSpawnResponse>;
  onSubagentEnded?(req: OnSubagentEndedRequest, ctx: EngineCallContext): EmptyReply<OnSubagentEndedResponse>;
  dispose?(req: DisposeRequest, ctx: EngineCallContext): EmptyReply<DisposeResponse>;
  /**
   * A session was deleted in contextd: purge everything derived from it (rows, index entries,
   * summaries, files). May come more than once, and for a session the engine never saw: answer
   * `{ purged: false }` then. Throwing makes contextd retry later (it never quarantines the engine).
   */
  forgetSession?(req: ForgetSessionRequest, ctx: EngineCallContext): Reply<ForgetSessionResponse>;
}

export const REQUIRED_METHODS = ["assemble", "compact"] as const;
export const OPTIONAL_METHODS = [
  "ingest",
  "bootstrap",
  "ingestBatch",
  "afterTurn",
  "maintain",
  "prepareSubagentSpawn",
  "rollbackSubagentSpawn",
  "onSubagentEnded",
  "dispose",
  "forgetSession",
] as const;
export type EngineMethodName = (typeof REQUIRED_METHODS)[number] | (typeof OPTIONAL_METHODS)[number];

const KNOWN_KEYS = new Set<string>(["info", ...REQUIRED_METHODS, ...OPTIONAL_METHODS]);
const MAINTENANCE_MODES: Record<string, TurnMaintenanceMode> = {
  foreground: TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND,
  background: TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND,
};

/** Engine ids contextd reserves (`legacy`, the built-in default, belongs to `core`: registry.proto). */
const RESERVED_IDS = new Set([LEGACY_ENGINE_ID]);

function fail(problem: string): never {
  throw new Error(`serveEngine: invalid engine definition: ${problem}`);
}

/**
 * Checks an engine definition before anything is served, so a mistake surfaces at start with a
 * message that names it rather than as a refused registration or an UNIMPLEMENTED later.
 */
export function validateDefinition(def: unknown): asserts def is EngineDefinition {
  if (typeof def !== "object" || def === null) fail("expected an object with `info`, `assemble` and `compact`");
  const d = def as Record<string, unknown>;
  const info = d.info as Record<string, unknown> | undefined;
  if (typeof info !== "object" || info === null) fail("`info` is missing (it needs at least `id` and `name`)");
  if (typeof info.id !== "string" || !info.id.trim()) fail("`info.id` must be a non-empty string");
  if (info.id !== info.id.trim()) fail(`\`info.id\` "${info.id}" has leading or trailing whitespace`);
  if (RESERVED_IDS.has(info.id)) fail(`\`info.id\` "${info.id}" is reserved for contextd's built-in engine`);
  if (typeof info.name !== "string" || !info.name.trim()) fail("`info.name` must be a non-empty string");
  if (info.version !== undefined && typeof info.version !== "string") fail("`info.version` must be a string");
  if (info.ownsCompaction !== undefined && typeof info.ownsCompaction !== "boolean") fail("`info.ownsCompaction` must be a boolean");
  const mode = info.turnMaintenanceMode;
  if (
    mode !== undefined &&
    !(typeof mode === "string" && mode in MAINTENANCE_MODES) &&
    mode !== TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND &&
    mode !== TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND &&
    mode !== TurnMaintenanceMode.TURN_MAINTENANCE_MODE_UNSPECIFIED
  ) {
    fail('`info.turnMaintenanceMode` must be "foreground", "background" or a TurnMaintenanceMode value');
  }
  if (info.hostRequirements !== undefined && !(Array.isArray(info.hostRequirements) && info.hostRequirements.every((r) => typeof r === "string" && r.trim()))) {
    fail("`info.hostRequirements` must be an array of non-empty strings");
  }
  for (const name of REQUIRED_METHODS) {
    if (typeof d[name] !== "function") fail(`\`${name}\` must be a function (it is ${describe(d[name])})`);
  }
  for (const name of OPTIONAL_METHODS) {
    if (d[name] !== undefined && typeof d[name] !== "function") fail(`\`${name}\` must be a function when present (it is ${describe(d[name])})`);
  }
  // Catch a misspelt optional method (e.g. `afterturn`), which would otherwise silently turn the
  // capability off.
  for (const key of Object.keys(d)) {
    if (KNOWN_KEYS.has(key)) continue;
    const match = [...KNOWN_KEYS].find((k) => k.toLowerCase() === key.toLowerCase().replace(/[_-]/g, ""));
    if (match) fail(`unknown member \`${key}\`: did you mean \`${match}\`?`);
  }
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  return `a ${typeof value}`;
}

export function deriveCapabilities(def: EngineDefinition): EngineCapabilities {
  return {
    bootstrap: typeof def.bootstrap === "function",
    ingestBatch: typeof def.ingestBatch === "function",
    afterTurn: typeof def.afterTurn === "function",
    maintain: typeof def.maintain === "function",
    subagents: typeof def.prepareSubagentSpawn === "function" || typeof def.rollbackSubagentSpawn === "function" || typeof def.onSubagentEnded === "function",
    dispose: typeof def.dispose === "function",
    forget: typeof def.forgetSession === "function",
  };
}

/** The EngineInfo that GetInfo answers: `info` plus derived capabilities and protocol versions. */
export function buildEngineInfo(def: EngineDefinition): EngineInfo {
  const { info } = def;
  const mode = info.turnMaintenanceMode;
  return EngineInfo.fromPartial({
    id: info.id,
    name: info.name,
    version: info.version ?? "",
    ownsCompaction: info.ownsCompaction ?? false,
    turnMaintenanceMode:
      mode === undefined || mode === TurnMaintenanceMode.TURN_MAINTENANCE_MODE_UNSPECIFIED
        ? TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND
        : typeof mode === "string"
          ? MAINTENANCE_MODES[mode]
          : mode,
    capabilities: deriveCapabilities(def),
    hostRequirements: hostRequirements(def),
    protocolVersions: [PROTOCOL_VERSION],
  });
}

/** `info.hostRequirements`, plus `host-compaction` when `compact` is the SDK's own delegating one (it calls DelegateCompaction). */
function hostRequirements(def: EngineDefinition): string[] {
  const declared = [...(def.info.hostRequirements ?? [])];
  if (def.compact === delegateCompactionToHost && !declared.includes("host-compaction")) declared.push("host-compaction");
  return declared;
}
