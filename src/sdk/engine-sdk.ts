/**
 * contextd engine SDK (`contextd/engine-sdk`): turns a plain TypeScript object into an
 * out-of-process context engine. `serveEngine(definition, options)`
 *
 * - serves `contextd.v1.ContextEngineService` (all 12 RPCs) and `grpc.health.v1` on `listen`;
 * - answers GetInfo from `definition.info`, with `capabilities` derived from which optional methods
 *   exist and `protocol_versions: [1]`; an optional RPC the definition lacks answers UNIMPLEMENTED;
 * - gives every method an {@link EngineCallContext}: an AbortSignal that fires when the caller
 *   cancels or its deadline passes (answers produced afterwards are dropped), the deadline, a
 *   logger, and — when the request carried a HostContext — a {@link HostClient} for calling back
 *   into the host (transcript, delegated compaction, LLM completion) with that call's credentials;
 * - maps errors: a `ContextdError` keeps its gRPC status, an abort answers CANCELLED or
 *   DEADLINE_EXCEEDED, anything else INTERNAL with the message; answers are normalised with
 *   `fromPartial`, so methods return partial objects;
 * - registers with contextd's registry when one is configured (retrying with backoff while it is
 *   unreachable, registering again when it restarts and loses the engine), and on SIGTERM/SIGINT
 *   deregisters, reports NOT_SERVING, drains in-flight calls and exits 0.
 *
 * Configuration in code (ServeEngineOptions, engine/options.ts) or through the environment:
 * `CONTEXTD_REGISTRY`, `CONTEXTD_OWNER`, `CONTEXTD_OWNER_TOKEN`, `CONTEXTD_ENGINE_LISTEN` (default
 * `127.0.0.1:0`: a free port, and the registered endpoint is the real one), plus
 * `CONTEXTD_ENGINE_ADVERTISE` and `CONTEXTD_LOG_LEVEL`. Without a registry the engine only serves
 * (tests, `contextctl`, debugging).
 *
 * A complete engine — the pinned messages (system messages, the compaction summary), then the newest
 * messages that fit the budget, and the host compacts — is engines/newest-first/main.ts (the example
 * of docs/engines.md, "Write your own engine"; run by test/unit/sdk/engine-sdk.test.ts).
 *
 * Run it next to contextd:
 * `CONTEXTD_REGISTRY=127.0.0.1:50051 CONTEXTD_OWNER=acme CONTEXTD_OWNER_TOKEN=$ACME_ENGINE_TOKEN node newest-first.js`,
 * then select it with `slots.context_engine: newest-first`.
 *
 * Decisions worth knowing:
 * - `ingest` is optional and defaults to `{ ingested: true }`: the host has already stored the
 *   message, and most engines read what they need from the Assemble/Compact requests.
 * - `estimatedTokens` of an Assemble answer defaults to the sum of the returned messages'
 *   `tokenCount`. An answer over `tokenBudget` is logged as a warning here and treated as a
 *   contract violation (quarantine) by the registry unless it says PREASSEMBLY_MAY_OVERFLOW.
 * - `subagents` is a capability when any of prepareSubagentSpawn / rollbackSubagentSpawn /
 *   onSubagentEnded exists; the missing ones of the three answer empty responses.
 * - Registration refusals other than UNREACHABLE, and UNAUTHENTICATED / PERMISSION_DENIED /
 *   UNIMPLEMENTED / INVALID_ARGUMENT, are permanent: `registered` rejects with a
 *   {@link RegistrationError}, the error is logged, and the engine keeps serving.
 * - After registering, the SDK calls GetEngine every `heartbeatMs` (2 s) with the owner token; when
 *   the registry answers NOT_FOUND (it restarted without persisting the engine, or the engine was
 *   deregistered) the engine registers again. When it names another endpoint, another instance
 *   under the same id and owner (a replica, a rolling deploy's next version) has taken the id over:
 *   the SDK logs a warning once and does not take it back, but keeps heartbeating, so it registers
 *   again if the other instance deregisters and the id becomes NOT_FOUND. The registry routes to
 *   one endpoint per id: give each instance its own id to have them all used.
 * - On stop the SDK deregisters only if the registry still points at this instance's endpoint, so
 *   an old instance draining after a restart does not remove its replacement.
 */

export * from "../contract/index.js";
// What an engine must keep whatever the budget: system messages and the compaction summary.
export { isPinned, isSystemMessage, splitPinned } from "../contract/pinned.js";

export { serveEngine, type RunningEngine } from "./engine/serve-engine.js";
export type { ServeEngineOptions } from "./engine/options.js";
export {
  buildEngineInfo,
  deriveCapabilities,
  validateDefinition,
  type Awaitable,
  type EmptyReply,
  type EngineCallContext,
  type EngineDefinition,
  type EngineInfoInput,
  type HostRequirement,
  type Reply,
} from "./engine/engine-definition.js";
export { delegateCompactionToHost } from "./engine/delegate-compaction.js";
// Answer an Assemble by the ids of the request messages kept instead of echoing them (engine.proto kept_entry_ids).
export { keepMessages } from "./engine/kept-messages.js";
export { HostCallError, type HostCallOptions, type HostClient, type ReadWholeTranscriptOptions } from "./engine/host-client.js";
export { RegistrationError, type RegistrationState, type RegistrationStatus } from "./engine/registration.js";

export {
  EngineCapabilities,
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
  type DisposeRequest,
  type DisposeResponse,
  type ForgetSessionRequest,
  type ForgetSessionResponse,
  type IngestBatchRequest,
  type IngestBatchResponse,
  type IngestRequest,
  type IngestResponse,
  type OnSubagentEndedRequest,
  type OnSubagentEndedResponse,
} from "../contract/gen/contextd/v1/engine.js";
export type {
  CompleteRequest,
  CompleteResponse,
  DelegateCompactionRequest,
  DelegateCompactionResponse,
  EntryRewrite,
  ReadTranscriptRequest,
  ReadTranscriptResponse,
  RewriteTranscriptEntriesRequest,
  RewriteTranscriptEntriesResponse,
} from "../contract/gen/contextd/v1/host.js";
export { Refusal, type EngineStatus, type RegisterEngineResponse } from "../contract/gen/contextd/v1/registry.js";
