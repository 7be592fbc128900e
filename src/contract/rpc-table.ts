import type { RequestContext, StreamSink } from "./request-context.js";

/**
 * The shape of a service's table of RPCs (SessionService's in src/host/session-service.ts,
 * HostService's in src/host/host-service.ts, RegistryService's in src/registry/registry-service.ts):
 * one row per RPC of the generated service definition, each stating as data what the server's
 * pipeline (src/server/middleware/bind-service.ts) does for it — who may call it, which sessions it
 * names and how it uses them, what bounds it — and the handler it runs. The rows are declared where
 * the service is; the server reads them (the layers import one way, so the vocabulary is here).
 */

/**
 * Who may call an RPC, proven from the call's credentials before the request is used; the server's
 * authorization step interprets each (src/server/authorization.ts; docs/security.md, "Principals"):
 *
 * - `runtime`: a runtime token (what it allows is the RuntimeAccess the handler gets; the sessions
 *   the request names are admitted against it by the session step);
 * - `reader`: any recognised contextd credential;
 * - `owner`: the owner the request claims (`owner`), by its token or mTLS identity;
 * - `operator`: an operator token;
 * - `host-grant`: the host token of an engine call in progress, covering the request's session and
 *   this RPC (HostGrants.verify).
 */
export type AuthRule = "runtime" | "reader" | "owner" | "operator" | "host-grant";

/**
 * What bounds a call, which decides how the server's admission steps count it
 * (src/server/middleware/load-shedding.ts, tenant-admission.ts):
 *
 * - `call`: its caller's deadline: work in flight, counted against `server.max_concurrent_calls`
 *   (and a runtime call against its token's calls in flight);
 * - `stream`: open for as long as its caller reads (WatchEngines): no work in flight — it would
 *   hold a slot forever — but one of its token's watch streams;
 * - `engine-call`: the engine call whose host token it carries (HostService): part of a call
 *   already admitted, never refused for load, or admitted calls would turn into fallbacks.
 */
export type DeadlineClass = "call" | "stream" | "engine-call";

type RequestOf<D> = D extends { requestDeserialize(value: Buffer): infer R } ? R : never;
type ResponseOf<D> = D extends { responseDeserialize(value: Buffer): infer R } ? R : never;

/** A unary RPC's handler: the request as it came (never written), the call's context, its resolved sessions. */
export type RowHandler<Req, Res, P, Resolved> = (request: Req, ctx: RequestContext<P>, sessions: Resolved) => Promise<Res>;
/** A server-streaming RPC's handler: as a unary one's, and where it writes. */
export type StreamRowHandler<Req, Res, P, Resolved> = (request: Req, ctx: RequestContext<P>, sessions: Resolved, sink: StreamSink<Res>) => Promise<void>;

/**
 * An audited RPC (docs/operations.md, "The audit trail"): the server's audit step
 * (src/server/middleware/audit-step.ts) records every call of it — allowed or refused, whatever
 * its outcome — with who made it, from where, when and how it ended. `target` names what it acts
 * on from the request, by ids only (never message content, never a token); it gets `undefined`
 * when the request could not be decoded. `outcome` may refine an OK answer that refused (a
 * registration answered `ok: false`).
 */
export interface Audited<Req = never, Res = never> {
  /** `engine.register`, `session.delete`, ... (proto/contextd/v1/audit.proto lists them). */
  action: string;
  target: (request: Req | undefined) => string;
  outcome?: (response: Res) => string | undefined;
}

/**
 * One RPC's row. `Session` is the service's own declaration of the sessions a request names and
 * how it uses them (`none` for a service whose requests name none); the service's session step
 * turns it into the handler's third argument, typed by the declaration where the row is made.
 */
export interface Row<Req, Res, P, Rule extends AuthRule, Session, Streaming extends boolean> {
  auth: Rule;
  session: Session;
  deadline: DeadlineClass;
  /** Present: every call is recorded in the audit trail (Audited). */
  audit?: Audited<Req, Res>;
  handler: Streaming extends true ? StreamRowHandler<Req, Res, P, never> : RowHandler<Req, Res, P, never>;
}

/**
 * A service's table: exactly one row per method of its generated definition `Def` (`SessionServiceService`, ...),
 * unary or server-streaming as the proto says. `Rule` narrows the rules the service's principal can
 * come from; `Extra` is what else the service's rows state (SessionService: the bytes a call appends).
 */
export type ServiceTable<Def, P, Rule extends AuthRule, Session, Extra = unknown> = {
  [K in keyof Def]: Row<RequestOf<Def[K]>, ResponseOf<Def[K]>, P, Rule, Session, Def[K] extends { responseStream: true } ? true : false> & Extra;
};

/**
 * The service's session step (the pipeline runs it after authorization and the call's turn, on
 * the decoded request): resolves the sessions `row.session` declares, once, into the handler's
 * third argument, and admits the call; `release` (when given) runs when the handler settles.
 */
export type SessionStep<P, Session, Extra = unknown> = (
  row: { session: Session } & Extra,
  request: unknown,
  ctx: RequestContext<P>,
) => Promise<{ sessions: unknown; release?: () => void }> | { sessions: unknown; release?: () => void };

/** The session step of a service whose requests name no session: the handler gets `undefined`. */
export const NO_SESSIONS: SessionStep<unknown, "none"> = () => ({ sessions: undefined });
