import { status, type handleUnaryCall, type sendUnaryData, type ServerUnaryCall, type ServiceError } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { reasonOfCode } from "../../contract/errors.js";
import { serviceErrorOf, statusOf, type ErrorStatus } from "../../contract/grpc-status.js";
import { lazyChild } from "../../contract/lazy-logger.js";
import { requestIdOf, traceContextOf } from "../../contract/metadata.js";
import { boundedText } from "../../contract/quote.js";
import {
  BootstrapResponse,
  ContextEngineServiceAfterTurnResponse,
  ContextEngineServiceAssembleResponse,
  ContextEngineServiceCompactResponse,
  ContextEngineServiceMaintainResponse,
  ContextEngineServicePrepareSubagentSpawnResponse,
  ContextEngineServiceRollbackSubagentSpawnResponse,
  DisposeResponse,
  ForgetSessionResponse,
  GetInfoResponse,
  IngestBatchResponse,
  IngestResponse,
  OnSubagentEndedResponse,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceServer,
  type EngineInfo,
} from "../../contract/gen/contextd/v1/engine.js";
import { PromptAuthority, type HostContext, type SessionRef } from "../../contract/gen/contextd/v1/types.js";
import { createCallScope, type CallScope } from "./call-context.js";
import type { EngineCallContext, EngineDefinition, EngineMethodName } from "./engine-definition.js";
import { BoundHostClient, type HostChannels } from "./host-client.js";

export interface EngineServiceDeps {
  def: EngineDefinition;
  info: EngineInfo;
  logger: Logger;
  hostChannels: HostChannels;
}

interface ResponseType<Res> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  fromPartial(object: any): Res;
}

interface RpcSpec<Req, Res> {
  /** The RPC name as in the proto, for logs and errors. */
  rpc: string;
  method: EngineMethodName;
  response: ResponseType<Res>;
  /** The session the call is about (the HostClient's default session). */
  session?: (req: Req) => SessionRef | undefined;
  host?: (req: Req) => HostContext | undefined;
  /** Answer when the engine does not implement `method`; UNIMPLEMENTED when absent. */
  fallback?: () => object;
  /** Adjusts the engine's (partial) answer before it is normalised. */
  finish?: (req: Req, answer: Record<string, unknown>, log: Logger) => Record<string, unknown>;
}

/** Maps what an engine method threw to the gRPC status its caller gets (contextd's own mapping, reason and details included). */
export function toStatus(err: unknown, scope?: CallScope): ErrorStatus {
  const cause = scope?.cause();
  const answer = statusOf(
    err,
    scope ? { deadlineMs: scope.deadlineMs, cause: cause === "deadline" ? "deadline" : cause ? "cancelled" : undefined } : undefined,
  );
  // Error text travels in HTTP/2 trailers: one over the peer's header limit (a few kB) loses the
  // whole answer, and the caller waits for its deadline instead of hearing the error.
  return { ...answer, details: boundedText(answer.details, MAX_DETAILS_CHARS) };
}

/** The longest error text an engine sends (escapes and the length note fit in trailers besides). */
const MAX_DETAILS_CHARS = 1024;

function serviceError(code: status, details: string): Partial<ServiceError> {
  return serviceErrorOf({ code, details, reason: reasonOfCode(code) });
}

/**
 * Sums the host-counted tokens of assembled messages, kept ones (`keptEntryIds`) included, for an
 * answer that left `estimatedTokens` unset.
 */
function finishAssemble(req: ContextEngineServiceAssembleRequest, answer: Record<string, unknown>, log: Logger): Record<string, unknown> {
  const messages = Array.isArray(answer.messages) ? (answer.messages as Array<{ tokenCount?: number } | undefined>) : [];
  const kept = Array.isArray(answer.keptEntryIds) ? (answer.keptEntryIds as unknown[]) : [];
  const keptTokens = () => {
    const counts = new Map(req.messages.map((m) => [m.id, m.tokenCount]));
    return kept.reduce((sum: number, id) => sum + (counts.get(id as string) ?? 0), 0);
  };
  const estimated =
    typeof answer.estimatedTokens === "number"
      ? answer.estimatedTokens
      : messages.reduce((sum, m) => sum + (m?.tokenCount ?? 0), 0) + (kept.length ? keptTokens() : 0);
  if (req.tokenBudget !== undefined && estimated > req.tokenBudget && answer.promptAuthority !== PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW) {
    log.warn(
      { estimatedTokens: estimated, tokenBudget: req.tokenBudget },
      "assembled context is over the token budget; the registry treats this as a contract violation (answer PREASSEMBLY_MAY_OVERFLOW if intended)",
    );
  }
  return { ...answer, estimatedTokens: estimated };
}

const sessionOf = <R extends { session?: SessionRef }>(req: R) => req.session;
const hostOf = <R extends { host?: HostContext }>(req: R) => req.host;

/**
 * ContextEngineService over an EngineDefinition: each RPC gets a call context (deadline and
 * cancellation as an AbortSignal, a HostClient when the request carried a HostContext, a logger),
 * answers are normalised with `fromPartial`, errors mapped to gRPC statuses, and answers that come
 * after the call ended are dropped.
 */
export function createEngineService(deps: EngineServiceDeps): ContextEngineServiceServer {
  const { info, logger } = deps;
  const getInfo: handleUnaryCall<unknown, GetInfoResponse> = (_call, callback) => callback(null, GetInfoResponse.fromPartial({ info }));

  return {
    getInfo,
    bootstrap: rpc(deps, { rpc: "Bootstrap", method: "bootstrap", response: BootstrapResponse, session: sessionOf, host: hostOf }),
    ingest: rpc(deps, {
      rpc: "Ingest",
      method: "ingest",
      response: IngestResponse,
      session: sessionOf,
      host: hostOf,
      fallback: () => ({ ingested: true }),
    }),
    ingestBatch: rpc(deps, { rpc: "IngestBatch", method: "ingestBatch", response: IngestBatchResponse, session: sessionOf, host: hostOf }),
    assemble: rpc(deps, {
      rpc: "Assemble",
      method: "assemble",
      response: ContextEngineServiceAssembleResponse,
      session: sessionOf,
      host: hostOf,
      finish: finishAssemble,
    }),
    compact: rpc(deps, { rpc: "Compact", method: "compact", response: ContextEngineServiceCompactResponse, session: sessionOf, host: hostOf }),
    afterTurn: rpc(deps, { rpc: "AfterTurn", method: "afterTurn", response: ContextEngineServiceAfterTurnResponse, session: sessionOf, host: hostOf }),
    maintain: rpc(deps, { rpc: "Maintain", method: "maintain", response: ContextEngineServiceMaintainResponse, session: sessionOf, host: hostOf }),
    prepareSubagentSpawn: rpc(deps, {
      rpc: "PrepareSubagentSpawn",
      method: "prepareSubagentSpawn",
      response: ContextEngineServicePrepareSubagentSpawnResponse,
      // The token is scoped to one session; for a spawn that is the child the engine prepares.
      session: (req) => req.child ?? req.parent,
      host: hostOf,
      fallback: info.capabilities?.subagents ? () => ({}) : undefined,
    }),
    rollbackSubagentSpawn: rpc(deps, {
      rpc: "RollbackSubagentSpawn",
      method: "rollbackSubagentSpawn",
      response: ContextEngineServiceRollbackSubagentSpawnResponse,
      session: (req) => req.child,
      fallback: info.capabilities?.subagents ? () => ({}) : undefined,
    }),
    onSubagentEnded: rpc(deps, {
      rpc: "OnSubagentEnded",
      method: "onSubagentEnded",
      response: OnSubagentEndedResponse,
      session: (req) => req.child,
      fallback: info.capabilities?.subagents ? () => ({}) : undefined,
    }),
    dispose: rpc(deps, { rpc: "Dispose", method: "dispose", response: DisposeResponse }),
    forgetSession: rpc(deps, { rpc: "ForgetSession", method: "forgetSession", response: ForgetSessionResponse, session: sessionOf }),
  };

  function rpc<Req, Res>(d: EngineServiceDeps, spec: RpcSpec<Req, Res>): handleUnaryCall<Req, Res> {
    const rpcLog = logger.child({ rpc: spec.rpc });
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      const impl = (d.def as unknown as Record<string, unknown>)[spec.method];
      if (typeof impl !== "function") {
        if (spec.fallback) {
          callback(null, spec.response.fromPartial(spec.fallback()));
        } else {
          callback(serviceError(status.UNIMPLEMENTED, `engine "${info.id}" does not implement ${spec.rpc}`), null);
        }
        return;
      }

      const scope = createCallScope(call);
      // A child logger per call only when something is logged: creating one on every call was a
      // measurable share of the per-call cost (bench/gateway_overhead).
      const log = lazyChild(rpcLog, () => ({ requestId: requestIdOf(call.metadata) }));
      const started = performance.now();
      let answered = false;
      const answer = (err: Partial<ServiceError> | null, res: Res | null) => {
        if (answered) return;
        answered = true;
        scope.dispose();
        callback(err, res);
      };

      // The caller is gone or out of time: answer now (grpc-js drops it when the client already
      // left) and ignore whatever the engine method produces later.
      const onAbort = () => {
        const answered = toStatus(scope.signal.reason, scope);
        log.debug({ code: status[answered.code], ms: Math.round(performance.now() - started) }, "call ended by the caller");
        answer(serviceErrorOf(answered), null);
      };
      if (scope.signal.aborted) {
        // The deadline had already passed when the call arrived: do not start the work at all.
        onAbort();
        return;
      }
      scope.signal.addEventListener("abort", onAbort, { once: true });

      const request = call.request;
      const hostContext = spec.host?.(request);
      const session = spec.session?.(request);
      const ctx: EngineCallContext = {
        signal: scope.signal,
        deadlineMs: scope.deadlineMs,
        host: hostContext?.endpoint
          ? new BoundHostClient(d.hostChannels, hostContext, {
              signal: scope.signal,
              deadlineMs: scope.deadlineMs,
              session,
              trace: traceContextOf(call.metadata),
            })
          : undefined,
        log,
        method: spec.rpc,
        metadata: call.metadata,
      };

      let pending: Promise<unknown>;
      try {
        pending = Promise.resolve((impl as (req: Req, ctx: EngineCallContext) => unknown).call(d.def, request, ctx));
      } catch (err) {
        pending = Promise.reject(err);
      }
      pending.then(
        (value) => {
          if (scope.signal.aborted) {
            log.debug("answer dropped: the call had already ended");
            return;
          }
          let res: Res;
          try {
            let partial = (value ?? {}) as Record<string, unknown>;
            if (typeof partial !== "object") throw new TypeError(`${spec.method}() returned a ${typeof partial}, expected an object`);
            if (spec.finish) partial = spec.finish(request, partial, log);
            res = spec.response.fromPartial(partial);
          } catch (err) {
            fail(err);
            return;
          }
          log.debug({ ms: Math.round(performance.now() - started) }, "ok");
          answer(null, res);
        },
        (err: unknown) => fail(err),
      );

      function fail(err: unknown) {
        if (scope.signal.aborted) {
          log.debug({ err }, "error after the call had ended");
          return;
        }
        const failed = toStatus(err, scope);
        if (failed.code === status.INTERNAL) log.error({ err }, `${spec.method}() failed`);
        else log.warn({ code: status[failed.code], reason: failed.details }, `${spec.method}() answered an error`);
        answer(serviceErrorOf(failed), null);
      }
    };
  }
}
