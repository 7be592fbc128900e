import type { SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { Handlers, RequestContext } from "../contract/request-context.js";
import { encodedSize } from "../contract/received-messages.js";
import type { TenantLimits } from "../contract/tenant-limits.js";
import type { TranscriptStore } from "../store/types.js";
import type { TranscriptExports } from "./export-transcript.js";
import type { TranscriptImports } from "./import-transcript.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { HostCall } from "./host-call.js";
import type { SessionHost, ViewedSession } from "./session-host.js";
import type { SessionQueries } from "./session-queries.js";
import { resolveSession, type SessionUse } from "./session-visibility.js";
import type { Subagents } from "./subagents.js";

/**
 * SessionService's handlers: the server's authorization rule proved a runtime credential (its
 * RuntimeAccess is the principal); here each call resolves the sessions it names against it
 * (session-visibility.ts: another agent's session is answered as a missing one), is admitted
 * against its token's and its agents' limits (tenant-limits.ts), then the host does the work.
 *
 * The agents a call counts against are those of its sessions as resolved: the stored agent of an
 * existing session, the claimed one of a session to create — and for Assemble, Compact and
 * AfterTurn (resolved on the view they read) the agent the request names; without one, such a call
 * counts against its token only.
 */
export function sessionHandlers(
  host: SessionHost,
  queries: SessionQueries,
  subagents: Subagents,
  imports: TranscriptImports,
  exports: TranscriptExports,
  store: TranscriptStore,
  limits: TenantLimits,
): Handlers<typeof SessionServiceService, RuntimeAccess> {
  const call = (ctx: RequestContext<RuntimeAccess>): HostCall => ({
    deadlineMs: ctx.deadlineMs,
    signal: ctx.signal,
    log: ctx.log,
    access: ctx.principal,
    trace: ctx.trace,
  });
  /**
   * `sessions` names each session the request refers to, its field and how the call uses it
   * (session-visibility.ts); `appendBytes`, what the call appends (the per-token byte rate).
   */
  function rpc<Req, Res>(
    sessions: (req: Req) => [SessionRef | undefined, string, SessionUse][],
    fn: (req: Req, call: HostCall, viewed?: () => Promise<ViewedSession>) => Promise<Res>,
    appendBytes?: (req: Req) => number,
  ) {
    return async (req: Req, ctx: RequestContext<RuntimeAccess>): Promise<Res> => {
      const named = sessions(req);
      const resolved: Record<string, SessionRef> = {};
      for (const [ref, field, use] of named) resolved[field] = await resolveSession(store, ctx.principal, ref, field, use);
      const release = limits.admit({
        tenant: ctx.principal.tenant,
        agents: Object.values(resolved).map((ref) => ref.agentId),
        appendBytes: appendBytes?.(req) ?? 0,
      });
      try {
        // The handler gets a copy naming the resolved sessions: the caller's request is never written.
        const request = named.length > 0 ? ({ ...req, ...resolved } as Req) : req;
        // A `view` session is admitted on the row its active view holds: the handler's first read,
        // made through this (after it has checked the rest of its request).
        const viewField = named.find(([, , use]) => use === "view")?.[1];
        const viewed = viewField ? () => host.resolveView(resolved[viewField], ctx.principal) : undefined;
        return await fn(request, { ...call(ctx), away: ctx.turn.away }, viewed);
      } finally {
        release();
      }
    };
  }
  return {
    appendMessages: rpc(
      (r) => [[r.session, "session", "create"]],
      (r, c) => host.appendMessages(r, c),
      (r) => r.messages.reduce((sum, m) => sum + encodedSize(m), 0),
    ),
    assemble: rpc(
      (r) => [[r.session, "session", "view"]],
      (r, c, v) => host.assemble(r, c, v),
    ),
    compact: rpc(
      (r) => [[r.session, "session", "view"]],
      (r, c, v) => host.compact(r, c, v),
    ),
    afterTurn: rpc(
      (r) => [[r.session, "session", "view"]],
      (r, c, v) => host.afterTurn(r, c, v),
    ),
    maintain: rpc(
      (r) => [[r.session, "session", "existing"]],
      (r, c) => host.maintain(r, c),
    ),
    prepareSubagentSpawn: rpc(
      (r) => [
        [r.parent, "parent", "existing"],
        [r.child, "child", "create"],
      ],
      (r, c) => subagents.prepare(r, c),
    ),
    // The handle names the child; Subagents.rollback resolves it the same way.
    rollbackSubagentSpawn: rpc(
      () => [],
      (r, c) => subagents.rollback(r, c),
    ),
    endSubagent: rpc(
      (r) => [[r.child, "child", "existing"]],
      (r, c) => subagents.end(r, c),
    ),
    getSession: rpc(
      (r) => [[r.session, "session", "existing"]],
      (r) => queries.getSession(r),
    ),
    listSessions: rpc(
      () => [],
      (r, c) => queries.listSessions(r, c.access),
    ),
    getTranscript: rpc(
      (r) => [[r.session, "session", "existing"]],
      (r, c) => queries.getTranscript(r, c.access),
    ),
    deleteSession: rpc(
      (r) => [[r.session, "session", "existing"]],
      (r) => queries.deleteSession(r),
    ),
    importTranscript: rpc(
      (r) => [[r.session, "session", "create"]],
      (r, c) => imports.importTranscript(r, c),
      (r) => r.jsonl.length,
    ),
    exportTranscript: rpc(
      (r) => [[r.session, "session", "existing"]],
      (r) => exports.exportTranscript(r),
    ),
  };
}
