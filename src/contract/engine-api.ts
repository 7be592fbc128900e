import type {
  BootstrapRequest,
  BootstrapResponse,
  ContextEngineServiceAfterTurnRequest,
  ContextEngineServiceAfterTurnResponse,
  ContextEngineServiceAssembleRequest,
  ContextEngineServiceAssembleResponse,
  ContextEngineServiceCompactRequest,
  ContextEngineServiceCompactResponse,
  ContextEngineServiceMaintainRequest,
  ContextEngineServiceMaintainResponse,
  ContextEngineServicePrepareSubagentSpawnRequest,
  ContextEngineServicePrepareSubagentSpawnResponse,
  ContextEngineServiceRollbackSubagentSpawnRequest,
  ContextEngineServiceRollbackSubagentSpawnResponse,
  EngineInfo,
  ForgetSessionRequest,
  ForgetSessionResponse,
  IngestBatchRequest,
  IngestBatchResponse,
  IngestRequest,
  IngestResponse,
  OnSubagentEndedRequest,
  OnSubagentEndedResponse,
} from "./gen/contextd/v1/engine.js";
import type { HostContext } from "./gen/contextd/v1/types.js";

/** The contract version this build speaks: protocol version 1, which proto/contextd/v1/ describes. */
export const PROTOCOL_VERSION = 1;

/**
 * What every engine call gets besides its request: a signal that fires when the caller's deadline
 * passes or the call is cancelled, and the absolute deadline so an engine can budget its work.
 */
export interface CallContext {
  signal: AbortSignal;
  deadlineMs: number;
  /** How a remote engine calls back into the host during this call (unset for in-process engines). */
  host?: HostContext;
  /** The W3C trace context the engine call continues (`traceparent`, `tracestate`), when there is one. */
  trace?: Record<string, string>;
  /**
   * Runs a wait outside contextd (the remote engine's answer, a summarizer's model request) while
   * the caller's tenant gives its turn at doing work up (src/contract/tenant-limits.ts). Absent:
   * run as is.
   */
  away?: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * ContextEngineService as a TypeScript interface. The in-process `legacy` engine implements it
 * directly; a remote engine is reached through a client that implements it over gRPC, so the host
 * and router never know which kind they are calling.
 */
export interface ContextEngine {
  info(): EngineInfo;
  ingest(req: IngestRequest, ctx: CallContext): Promise<IngestResponse>;
  assemble(req: ContextEngineServiceAssembleRequest, ctx: CallContext): Promise<ContextEngineServiceAssembleResponse>;
  compact(req: ContextEngineServiceCompactRequest, ctx: CallContext): Promise<ContextEngineServiceCompactResponse>;
  bootstrap?(req: BootstrapRequest, ctx: CallContext): Promise<BootstrapResponse>;
  ingestBatch?(req: IngestBatchRequest, ctx: CallContext): Promise<IngestBatchResponse>;
  afterTurn?(req: ContextEngineServiceAfterTurnRequest, ctx: CallContext): Promise<ContextEngineServiceAfterTurnResponse>;
  maintain?(req: ContextEngineServiceMaintainRequest, ctx: CallContext): Promise<ContextEngineServiceMaintainResponse>;
  prepareSubagentSpawn?(req: ContextEngineServicePrepareSubagentSpawnRequest, ctx: CallContext): Promise<ContextEngineServicePrepareSubagentSpawnResponse>;
  rollbackSubagentSpawn?(req: ContextEngineServiceRollbackSubagentSpawnRequest, ctx: CallContext): Promise<ContextEngineServiceRollbackSubagentSpawnResponse>;
  onSubagentEnded?(req: OnSubagentEndedRequest, ctx: CallContext): Promise<OnSubagentEndedResponse>;
  dispose?(ctx: CallContext): Promise<void>;
  forgetSession?(req: ForgetSessionRequest, ctx: CallContext): Promise<ForgetSessionResponse>;
}
