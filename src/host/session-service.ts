import type { SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { Handlers, RequestContext } from "../contract/request-context.js";
import type { TranscriptStore } from "../store/types.js";
import type { TranscriptExports } from "./export-transcript.js";
import type { TranscriptImports } from "./import-transcript.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { HostCall, SessionHost } from "./session-host.js";
import type { SessionQueries } from "./session-queries.js";
import type { Subagents } from "./subagents.js";

/**
 * SessionService's handlers: the server's authorization rule proved a runtime credential (its
 * RuntimeAccess is the principal); here each call adopts the sessions it names, then the host does
 * the work.
 */
export function sessionHandlers(
  host: SessionHost,
  queries: SessionQueries,
  subagents: Subagents,
  imports: TranscriptImports,
  exports: TranscriptExports,
  store: TranscriptStore,
): Handlers<typeof SessionServiceService, RuntimeAccess> {
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
  const call = (ctx: RequestContext<RuntimeAccess>): HostCall => ({ deadlineMs: ctx.deadlineMs, signal: ctx.signal, log: ctx.log, access: ctx.principal, trace: ctx.trace });
  function rpc<Req, Res>(sessions: (req: Req) => (SessionRef | undefined)[], fn: (req: Req, call: HostCall) => Promise<Res>) {
    return async (req: Req, ctx: RequestContext<RuntimeAccess>): Promise<Res> => {
      for (const ref of sessions(req)) await adopt(ref, ctx.principal);
      return fn(req, call(ctx));
    };
  }
  return {
    appendMessages: rpc((r) => [r.session], (r, c) => host.appendMessages(r, c)),
    assemble: rpc((r) => [r.session], (r, c) => host.assemble(r, c)),
    compact: rpc((r) => [r.session], (r, c) => host.compact(r, c)),
    afterTurn: rpc((r) => [r.session], (r, c) => host.afterTurn(r, c)),
    maintain: rpc((r) => [r.session], (r, c) => host.maintain(r, c)),
    prepareSubagentSpawn: rpc((r) => [r.parent, r.child], (r, c) => subagents.prepare(r, c)),
    rollbackSubagentSpawn: rpc(() => [], (r, c) => subagents.rollback(r, c)),
    endSubagent: rpc((r) => [r.child], (r, c) => subagents.end(r, c)),
    getSession: rpc((r) => [r.session], (r) => queries.getSession(r)),
    listSessions: rpc(() => [], (r, c) => queries.listSessions(r, c.access)),
    getTranscript: rpc((r) => [r.session], (r) => queries.getTranscript(r)),
    deleteSession: rpc((r) => [r.session], (r) => queries.deleteSession(r)),
    importTranscript: rpc((r) => [r.session], (r) => imports.importTranscript(r)),
    exportTranscript: rpc((r) => [r.session], (r) => exports.exportTranscript(r)),
  };
}
