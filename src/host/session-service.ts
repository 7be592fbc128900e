import type { Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { SessionServiceServer } from "../contract/gen/contextd/v1/session.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import { unary, type RequestContext } from "../contract/unary.js";
import type { TranscriptStore } from "../store/types.js";
import type { TranscriptExports } from "./export-transcript.js";
import type { TranscriptImports } from "./import-transcript.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { HostCall, SessionHost } from "./session-host.js";
import type { SessionQueries } from "./session-queries.js";
import type { Subagents } from "./subagents.js";

/** Checks a runtime's credentials (UNAUTHENTICATED when missing or unknown). */
export interface RuntimeAuthorizer {
  authenticateRuntime(metadata: Metadata): RuntimeAccess;
}

/** SessionService over gRPC: authorization, then the host. */
export function createSessionService(
  host: SessionHost,
  queries: SessionQueries,
  subagents: Subagents,
  imports: TranscriptImports,
  exports: TranscriptExports,
  auth: RuntimeAuthorizer,
  store: TranscriptStore,
  logger: Logger,
): SessionServiceServer {
  /**
   * A session belongs to the agent it was created for: the stored agent id, not the one a request
   * claims, decides what a token may do and which engine serves it. The request's agent id counts
   * only for a session that does not exist yet.
   */
  const adopt = async (ref: SessionRef | undefined, access: RuntimeAccess) => {
    if (!ref) return;
    const stored = ref.sessionId.trim() ? await store.getSession(ref.sessionId.trim()) : undefined;
    if (stored) {
      ref.agentId = stored.agentId;
      ref.sessionKey ||= stored.sessionKey;
    }
    access.checkAgent(ref.agentId);
  };
  const call = (ctx: RequestContext, access: RuntimeAccess): HostCall => ({ deadlineMs: ctx.deadlineMs, signal: ctx.signal, log: ctx.log, access });
  function rpc<Req, Res>(method: string, sessions: (req: Req) => (SessionRef | undefined)[], fn: (req: Req, call: HostCall) => Promise<Res>) {
    return unary<Req, Res>(method, logger, async (req, ctx) => {
      const access = auth.authenticateRuntime(ctx.metadata);
      for (const ref of sessions(req)) await adopt(ref, access);
      return fn(req, call(ctx, access));
    });
  }
  return {
    appendMessages: rpc("AppendMessages", (r) => [r.session], (r, c) => host.appendMessages(r, c)),
    assemble: rpc("Assemble", (r) => [r.session], (r, c) => host.assemble(r, c)),
    compact: rpc("Compact", (r) => [r.session], (r, c) => host.compact(r, c)),
    afterTurn: rpc("AfterTurn", (r) => [r.session], (r, c) => host.afterTurn(r, c)),
    maintain: rpc("Maintain", (r) => [r.session], (r, c) => host.maintain(r, c)),
    prepareSubagentSpawn: rpc("PrepareSubagentSpawn", (r) => [r.parent, r.child], (r, c) => subagents.prepare(r, c)),
    rollbackSubagentSpawn: rpc("RollbackSubagentSpawn", () => [], (r, c) => subagents.rollback(r, c)),
    endSubagent: rpc("EndSubagent", (r) => [r.child], (r, c) => subagents.end(r, c)),
    getSession: rpc("GetSession", (r) => [r.session], (r) => queries.getSession(r)),
    listSessions: rpc("ListSessions", () => [], (r, c) => queries.listSessions(r, c.access)),
    getTranscript: rpc("GetTranscript", (r) => [r.session], (r) => queries.getTranscript(r)),
    deleteSession: rpc("DeleteSession", (r) => [r.session], (r) => queries.deleteSession(r)),
    importTranscript: rpc("ImportTranscript", (r) => [r.session], (r) => imports.importTranscript(r)),
    exportTranscript: rpc("ExportTranscript", (r) => [r.session], (r) => exports.exportTranscript(r)),
  };
}
