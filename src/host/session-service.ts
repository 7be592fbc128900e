import type * as Q from "../contract/gen/contextd/v1/search.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { RequestContext } from "../contract/request-context.js";
import { encodedSize } from "../contract/received-messages.js";
import type { Audited, DeadlineClass, Row, ServiceTable, SessionStep } from "../contract/rpc-table.js";
import type { TenantLimits } from "../contract/tenant-limits.js";
import type { TranscriptStore } from "../store/types.js";
import type { TranscriptExports } from "./export-transcript.js";
import type { TranscriptImports } from "./import-transcript.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { HostCall } from "./host-call.js";
import type { SessionHost } from "./session-host.js";
import type { SessionQueries } from "./session-queries.js";
import { resolveSession, type Resolved, type SessionUse } from "./session-visibility.js";
import type { Subagents } from "./subagents.js";
import { AgentQuotas } from "./agent-quotas.js";

/**
 * The sessions a SessionService request names — its SessionRef fields, by name — and how the call
 * uses each (session-visibility.ts). `{}`: the request names none (ListSessions; RollbackSubagentSpawn,
 * whose handle names the child, which Subagents.rollback admits the same way).
 */
export type SessionFields = Readonly<Record<string, SessionUse>>;

/** What the handler of a row declaring `D` gets: each named session resolved for its use. */
export type ResolvedSessions<D extends SessionFields> = { readonly [F in keyof D]: Resolved<D[F]> };

/** What SessionService's rows state besides the common columns: the bytes a call appends (the per-token byte rate). */
export interface AppendBytes {
  appendBytes?: (request: never) => number;
}

export type SessionTable = ServiceTable<typeof SessionServiceService, RuntimeAccess, "runtime", SessionFields, AppendBytes>;

/**
 * One SessionService row. The handler's sessions are typed by the row's own declaration: a `view`
 * session is a SessionView — the only way to the session's view, and it admits the session — and
 * an `existing` or `create` one an AdmittedSession, which is what the host's operations take; so a
 * row cannot reach the host with a session its caller was not admitted to.
 */
function rpc<Req, Res, const D extends SessionFields>(row: {
  auth: "runtime";
  session: D & { readonly [F in keyof D]: F extends keyof Req ? SessionUse : never };
  deadline: DeadlineClass;
  handler: (request: Req, ctx: RequestContext<RuntimeAccess>, sessions: ResolvedSessions<D>) => Promise<Res>;
  appendBytes?: (request: Req) => number;
  audit?: Audited<Req, Res>;
}) {
  return row as unknown as Row<Req, Res, RuntimeAccess, "runtime", SessionFields, false> & AppendBytes;
}

/**
 * SessionService's table: per RPC, its authorization rule (a runtime token, whose RuntimeAccess is
 * the principal), the sessions it names and how it uses them, its deadline class and its handler.
 * The server's pipeline (src/server/middleware/bind-service.ts) proves the token, gives the call
 * its turn, and runs `sessionStep` below, which resolves the sessions once and admits the call
 * against its token's and its agents' limits (tenant-limits.ts); then the host does the work.
 */
export function sessionService(
  host: SessionHost,
  queries: SessionQueries,
  subagents: Subagents,
  imports: TranscriptImports,
  exports: TranscriptExports,
): SessionTable {
  const call = (ctx: RequestContext<RuntimeAccess>): HostCall => ({
    deadlineMs: ctx.deadlineMs,
    signal: ctx.signal,
    log: ctx.log,
    access: ctx.principal,
    trace: ctx.trace,
    away: ctx.turn.away,
  });
  // prettier-ignore
  return {
    appendMessages: rpc({
      auth: "runtime", session: { session: "create" }, deadline: "call",
      handler: (r: S.AppendMessagesRequest, ctx, s) => host.appendMessages(r, call(ctx), s.session),
      appendBytes: (r) => r.messages.reduce((sum, m) => sum + encodedSize(m), 0),
    }),
    assemble: rpc({
      auth: "runtime", session: { session: "view" }, deadline: "call",
      handler: (r: S.AssembleRequest, ctx, s) => host.assemble(r, call(ctx), s.session),
    }),
    compact: rpc({
      auth: "runtime", session: { session: "view" }, deadline: "call",
      handler: (r: S.CompactRequest, ctx, s) => host.compact(r, call(ctx), s.session),
    }),
    afterTurn: rpc({
      auth: "runtime", session: { session: "view" }, deadline: "call",
      handler: (r: S.AfterTurnRequest, ctx, s) => host.afterTurn(r, call(ctx), s.session),
    }),
    maintain: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      handler: (r: S.MaintainRequest, ctx, s) => host.maintain(r, call(ctx), s.session),
    }),
    prepareSubagentSpawn: rpc({
      auth: "runtime", session: { parent: "existing", child: "create" }, deadline: "call",
      handler: (r: S.PrepareSubagentSpawnRequest, ctx, s) => subagents.prepare(r, call(ctx), s),
    }),
    rollbackSubagentSpawn: rpc({
      auth: "runtime", session: {}, deadline: "call",
      handler: (r: S.RollbackSubagentSpawnRequest, ctx) => subagents.rollback(r, call(ctx)),
    }),
    endSubagent: rpc({
      auth: "runtime", session: { child: "existing" }, deadline: "call",
      handler: (r: S.EndSubagentRequest, ctx, s) => subagents.end(r, call(ctx), s.child),
    }),
    getSession: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      handler: (_r: S.GetSessionRequest, _ctx, s) => queries.getSession(s.session),
    }),
    listSessions: rpc({
      auth: "runtime", session: {}, deadline: "call",
      handler: (r: S.ListSessionsRequest, ctx) => queries.listSessions(r, ctx.principal),
    }),
    getTranscript: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      handler: (r: S.GetTranscriptRequest, ctx, s) => queries.getTranscript(r, ctx.principal, s.session),
    }),
    searchTranscript: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      handler: (r: Q.SearchTranscriptRequest, ctx, s) => queries.searchTranscript(r, ctx.principal, s.session),
    }),
    expandCompaction: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      handler: (r: Q.ExpandCompactionRequest, ctx, s) => queries.expandCompaction(r, ctx.principal, s.session),
    }),
    deleteSession: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      audit: { action: "session.delete", target: (r?: S.DeleteSessionRequest) => sessionTarget(r?.session) },
      handler: (r: S.DeleteSessionRequest, _ctx, s) => queries.deleteSession(r, s.session),
    }),
    importTranscript: rpc({
      auth: "runtime", session: { session: "create" }, deadline: "call",
      audit: { action: "session.import", target: (r?: S.ImportTranscriptRequest) => sessionTarget(r?.session) },
      handler: (r: S.ImportTranscriptRequest, ctx, s) => imports.importTranscript(r, s.session, call(ctx)),
      appendBytes: (r) => r.jsonl.length,
    }),
    exportTranscript: rpc({
      auth: "runtime", session: { session: "existing" }, deadline: "call",
      audit: { action: "session.export", target: (r?: S.ExportTranscriptRequest) => sessionTarget(r?.session) },
      handler: (_r: S.ExportTranscriptRequest, _ctx, s) => exports.exportTranscript(s.session),
    }),
  };
}

/**
 * SessionService's session step: each session a row declares, resolved once against the caller's
 * credentials (session-visibility.ts: a new ref with the stored agent, the request never written;
 * a `view` session's claim checked now and admitted on its one view read), then the call admitted
 * against its token's and its agents' limits until its handler settles.
 *
 * The agents a call counts against are those of its sessions as resolved: the stored agent of an
 * existing session, the claimed one of a session to create — and for Assemble, Compact and
 * AfterTurn (resolved on the view they read) the agent the request names; without one, such a call
 * counts against its token only. Before that, a session the row may create is admitted against its
 * agent's quotas (agent-quotas.ts).
 */
export function sessionStep(
  store: TranscriptStore,
  limits: TenantLimits,
  quotas: AgentQuotas = new AgentQuotas(store),
): SessionStep<RuntimeAccess, SessionFields, AppendBytes> {
  return async (row, request, ctx) => {
    const named = request as Readonly<Record<string, SessionRef | undefined>>;
    const sessions: Record<string, Resolved<SessionUse>> = {};
    const agents: string[] = [];
    const appendBytes = (row.appendBytes as ((request: unknown) => number) | undefined)?.(request) ?? 0;
    let bytesClaimed = false;
    for (const [field, use] of Object.entries(row.session)) {
      const resolved = await resolveSession(store, ctx.principal, named[field], field, use);
      sessions[field] = resolved;
      agents.push("claimed" in resolved ? resolved.claimed.agentId : resolved.agentId);
      // A session the call may create is what its quotas count (agent-quotas.ts), with the bytes
      // the call writes into it: checked before anything is written.
      if (use === "create" && !("claimed" in resolved)) {
        await quotas.admit({ agentId: resolved.agentId, createsSessionId: resolved.sessionId, bytes: bytesClaimed ? 0 : appendBytes });
        bytesClaimed = true;
      }
    }
    const release = limits.admit({ tenant: ctx.principal.tenant, agents, appendBytes });
    return { sessions, release };
  };
}

/** An audit record's target for a session: its id and the agent the request named (ids only). */
function sessionTarget(ref: SessionRef | undefined): string {
  return ref?.agentId ? `session ${ref.sessionId} agent ${ref.agentId}` : `session ${ref?.sessionId ?? ""}`;
}
