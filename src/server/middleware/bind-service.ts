import {
  status,
  type Metadata,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Logger } from "pino";
import { InvalidArgumentError } from "../../contract/errors.js";
import { isInternal, toServiceError } from "../../contract/grpc-status.js";
import { requestIdOf, traceContextOf } from "../../contract/metadata.js";
import type { RequestContext } from "../../contract/request-context.js";
import type { AuthRule, RowHandler, ServiceTable, SessionStep, StreamRowHandler } from "../../contract/rpc-table.js";
import { lazyChild } from "../../contract/lazy-logger.js";
import { NO_TURN, type Turn } from "../../contract/tenant-limits.js";
import type { Audited } from "../../contract/rpc-table.js";
import { auditedCall, type AuditSink } from "./audit-step.js";

/**
 * The authorization step (authorization.ts): interprets the rule the method's row states — proves
 * who calls from the credentials in `metadata` and, where the rule needs it, the request (the owner
 * a registration claims, the session a host token must cover) — and returns the principal handlers
 * get, or throws UNAUTHENTICATED / PERMISSION_DENIED / INVALID_ARGUMENT. `peer` is the client
 * certificate the TLS layer verified; `peerAddress` is grpc-js `getPeer()` (`ip:port`, `unknown`
 * for a unix socket), which a host token is bound to.
 */
export type Authorize<P, Rule extends AuthRule = AuthRule> = (
  rule: Rule,
  method: string,
  request: unknown,
  metadata: Metadata,
  peer: PeerCertificate | undefined,
  peerAddress?: string,
) => P;

export interface BindOptions<P, Rule extends AuthRule = AuthRule, Session = unknown, Extra = unknown> {
  logger: Logger;
  authorize: Authorize<P, Rule>;
  /** The service's session step: the sessions the row declares, resolved once for its handler. */
  sessions: SessionStep<P, Session, Extra>;
  /**
   * The call's turn at doing work (TenantLimits.turn), taken after authorization and before the
   * request is decoded; the handler gets it as `ctx.turn` and the adapter ends it when the handler
   * settles. Without it every call has its turn at once.
   */
  turn?: (principal: P, signal: AbortSignal) => Promise<Turn>;
  /** The audit step's sink (audit-step.ts): every call of a row that declares `audit` is handed to it. Without it nothing is audited. */
  audit?: AuditSink;
}

/** One row as the pipeline runs it, whatever its request and response types. */
interface BoundRow<P> {
  auth: AuthRule;
  session: unknown;
  audit?: Audited<unknown, unknown>;
  handler: RowHandler<unknown, unknown, P, unknown> | StreamRowHandler<unknown, unknown, P, unknown>;
}

/**
 * Binds a service's table (contract/rpc-table.ts) to grpc-js: the last steps of the server's
 * middleware, after the interceptors (request id, tracing, metrics and access log, admission;
 * interceptors.ts) have run for the call. Per call, in order, each step extending the call's
 * RequestContext:
 *
 * 1. the context: the caller's deadline and cancellation as one AbortSignal, a child logger, the
 *    trace context;
 * 2. authorization: the rule the method's row states, interpreted by `authorize` — the principal;
 * 3. the call's turn (`turn`), then the request decoded on it;
 * 4. the session step (`sessions`): the sessions the row declares, resolved once, and the call
 *    admitted — released when the handler settles;
 * 5. the row's handler, with the request as it came, the context and the resolved sessions;
 * 6. for a row that declares `audit`, the audit step (audit-step.ts): the call — allowed or
 *    refused at any step above — recorded with its outcome before its caller hears the answer;
 *
 * and whatever a step throws mapped to a gRPC status in the one place that does
 * (contract/grpc-status.ts). Internal errors are logged here with their stack; every call's outcome
 * is logged once by the access log. A table without a row for a method of the definition, or with
 * one the definition lacks, is refused here, when the server is built.
 */
export function bindService<Def extends ServiceDefinition, P, Rule extends AuthRule, Session, Extra>(
  definition: Def,
  table: ServiceTable<Def, P, Rule, Session, Extra>,
  options: BindOptions<P, Rule, Session, Extra>,
): UntypedServiceImplementation {
  const rows = table as unknown as Record<string, BoundRow<P> | undefined>;
  const extra = Object.keys(rows).filter((name) => !(name in definition));
  if (extra.length > 0) throw new Error(`rows for methods the service definition lacks: ${extra.join(", ")}`);
  const impl: UntypedServiceImplementation = {};
  for (const name of Object.keys(definition) as (keyof Def & string)[]) {
    const method = definition[name];
    const row = rows[name];
    if (!row) throw new Error(`no row for ${method.path}`);
    if (row.audit && method.responseStream) throw new Error(`${method.path}: the audit step records unary calls only`);
    const bound = options as unknown as BindOptions<P>;
    impl[name] = method.responseStream ? streamAdapter(method.path, row, bound) : unaryAdapter(method.path, row, bound);
  }
  return impl;
}

/**
 * The definition to register with grpc-js: its request decoders turn a request that cannot be
 * decoded into an INVALID_ARGUMENT answer naming the message type — a client's fault, where grpc-js
 * would answer INTERNAL "Error deserializing request" (which says "server bug" to every gRPC user).
 * Two kinds: bytes that are no protobuf of the request type (truncated, wrong wire types), and valid
 * protobuf the generated code cannot hold — a 64-bit integer past 2^53 - 1, on which ts-proto's
 * `forceLong=number` throws, though a Python or Go client sends one as easily as any other value.
 * The handler never runs for either: the adapter throws the error first.
 *
 * `deferred`: the request stays bytes until the call has its turn (BindOptions.turn), and is
 * decoded then. A tenant's calls waiting for their turn (up to its calls in flight, 64 by default)
 * would otherwise each hold its decoded request — for appends, thousands of objects — on the heap
 * while it waits: every young-generation collection copied them, and those pauses stopped every
 * tenant's calls. As bytes, a waiting call is one Buffer outside the heap. Only for a service whose
 * authorization rule does not read the request: the rule is given none.
 */
export function decodingDefinition<Def extends ServiceDefinition>(definition: Def, options: { deferred?: boolean } = {}): Def {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    const decode = (bytes: Buffer) => {
      try {
        return method.requestDeserialize(bytes);
      } catch (err) {
        return new UndecodableRequest(method.path, (err as Error).message ?? String(err));
      }
    };
    out[name] = { ...method, requestDeserialize: options.deferred ? (bytes: Buffer) => new EncodedRequest(bytes, decode) : decode };
  }
  return out as Def;
}

/** A request kept as its bytes until its call's turn (decodingDefinition's `deferred`). */
class EncodedRequest {
  constructor(
    private readonly bytes: Buffer,
    private readonly decode: (bytes: Buffer) => unknown,
  ) {}
  decoded(): unknown {
    return this.decode(this.bytes);
  }
}

/** The request as the handler gets it: decoded now if it was deferred; a request that cannot be decoded throws. */
function decodedRequest(request: unknown): unknown {
  const decoded = request instanceof EncodedRequest ? request.decoded() : request;
  if (decoded instanceof UndecodableRequest) throw decoded.error();
  return decoded;
}

class UndecodableRequest {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {}
  error(): InvalidArgumentError {
    const rpc = this.path.slice(1);
    if (/SAFE_INTEGER/.test(this.reason)) {
      return new InvalidArgumentError(
        `the request to ${rpc} holds a 64-bit integer outside ±${Number.MAX_SAFE_INTEGER} (2^53 - 1), the range contextd takes in an int64/uint64 field (ttl_ms, timestamp_ms, usage counts, ...)`,
      );
    }
    return new InvalidArgumentError(`the request to ${rpc} is not a valid protobuf message of its request type: ${this.reason}`);
  }
}

interface CallLike {
  metadata: Metadata;
  request: unknown;
  getDeadline(): Date | number;
  getAuthContext?: () => { sslPeerCertificate?: PeerCertificate };
  getPeer?: () => string;
}

function context<P>(path: string, row: BoundRow<P>, call: CallLike, options: BindOptions<P>, controller: AbortController): RequestContext<P> {
  if (call.request instanceof UndecodableRequest) throw call.request.error();
  const request = call.request instanceof EncodedRequest ? undefined : call.request;
  const requestId = requestIdOf(call.metadata);
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const peerCertificate = call.getAuthContext?.().sslPeerCertificate;
  const principal = options.authorize(row.auth, path, request, call.metadata, peerCertificate, call.getPeer?.());
  return {
    requestId,
    method: path,
    metadata: call.metadata,
    deadlineMs,
    signal: controller.signal,
    log: lazyChild(options.logger, () => ({ requestId, method: path.slice(path.lastIndexOf("/") + 1) })),
    peerCertificate,
    principal,
    trace: traceContextOf(call.metadata),
    turn: NO_TURN,
  };
}

/**
 * Runs `handler` on the call's turn (BindOptions.turn) with its request decoded and the sessions
 * its row declares resolved (BindOptions.sessions); releases what the session step admitted, then
 * ends the turn, when the handler settles.
 */
async function onTurn<P, T>(
  request: unknown,
  row: BoundRow<P>,
  ctx: RequestContext<P>,
  options: BindOptions<P>,
  handler: (request: unknown, ctx: RequestContext<P>, sessions: unknown) => Promise<T>,
  seen: { request?: unknown } = {},
): Promise<T> {
  const turn = options.turn ? await options.turn(ctx.principal, ctx.signal) : NO_TURN;
  try {
    const decoded = decodedRequest(request);
    seen.request = decoded;
    const turnCtx = { ...ctx, turn };
    const { sessions, release } = await options.sessions(row, decoded, turnCtx);
    try {
      return await handler(decoded, turnCtx, sessions);
    } finally {
      release?.();
    }
  } finally {
    turn.leave();
  }
}

function unaryAdapter<P>(path: string, row: BoundRow<P>, options: BindOptions<P>) {
  const handler = row.handler as RowHandler<unknown, unknown, P, unknown>;
  const audit = row.audit && options.audit ? { row: row.audit, sink: options.audit } : undefined;
  return (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
    const controller = new AbortController();
    let answered = false;
    // grpc-js emits 'cancelled' when the stream closes, also after a call it answered: only a
    // cancellation before the answer is the caller's (aborting afterwards was work for nothing on
    // every call — an Error with its stack, the signal's listeners).
    call.on("cancelled", () => {
      if (!answered) controller.abort(abortReason("cancelled by the caller"));
    });
    let ctx: RequestContext<P> | undefined;
    const seen: { request?: unknown } = {};
    // The audit step (audit-step.ts), for a row that declares it: the call recorded, then answered.
    const answer = (outcome: { ok: true; response: unknown } | { ok: false; code: status }, send: () => void) => {
      if (!audit) return send();
      const record = auditedCall(
        audit.row,
        {
          path,
          requestId: ctx?.requestId ?? requestIdOf(call.metadata),
          metadata: call.metadata,
          peerCertificate: call.getAuthContext?.().sslPeerCertificate,
          peer: call.getPeer?.() ?? "",
        },
        () => (seen.request !== undefined ? seen.request : requestAsItCame(call.request)),
        outcome,
      );
      audit.sink(record).then(send, (err: unknown) => {
        (ctx?.log ?? options.logger).error({ err, method: path }, "audit record not written");
        send();
      });
    };
    const fail = (err: unknown) => {
      answered = true;
      if (isInternal(err)) (ctx?.log ?? options.logger).error({ err, method: path }, "internal error");
      const e = toServiceError(err, { deadlineMs: ctx?.deadlineMs });
      answer({ ok: false, code: e.code ?? status.UNKNOWN }, () => callback(e, null));
    };
    try {
      ctx = context(path, row, call, options, controller);
      onTurn(call.request, row, ctx, options, handler, seen).then((res) => {
        answered = true;
        answer({ ok: true, response: res }, () => callback(null, res));
      }, fail);
    } catch (err) {
      fail(err);
    }
  };
}

/** The request of a call refused before its turn decoded it: decoded now, or undefined when it cannot be. */
function requestAsItCame(request: unknown): unknown {
  const decoded = request instanceof EncodedRequest ? request.decoded() : request;
  return decoded instanceof UndecodableRequest ? undefined : decoded;
}

function streamAdapter<P>(path: string, row: BoundRow<P>, options: BindOptions<P>) {
  const handler = row.handler as StreamRowHandler<unknown, unknown, P, unknown>;
  return (call: ServerWritableStream<unknown, unknown>) => {
    const controller = new AbortController();
    const closed = new AbortController();
    const close = () => closed.abort();
    call.on("cancelled", () => {
      close();
      controller.abort(abortReason("cancelled by the caller"));
    });
    call.on("close", close);
    call.on("error", close);
    let ctx: RequestContext<P> | undefined;
    const fail = (err: unknown) => {
      if (isInternal(err)) (ctx?.log ?? options.logger).error({ err, method: path }, "internal error");
      if (!closed.signal.aborted) call.emit("error", toServiceError(err, { deadlineMs: ctx?.deadlineMs }));
    };
    try {
      ctx = context(path, row, call, options, controller);
      const sink = {
        write: (m: unknown) => void call.write(m),
        closed: closed.signal,
        get backlog() {
          return call.writableLength;
        },
      };
      onTurn(call.request, row, ctx, options, (request, turnCtx, sessions) => handler(request, turnCtx, sessions, sink)).then(() => {
        if (!closed.signal.aborted) call.end();
      }, fail);
    } catch (err) {
      fail(err);
    }
  };
}

function abortReason(message: string): Error {
  const err = new Error(message);
  err.name = "AbortError";
  return err;
}
