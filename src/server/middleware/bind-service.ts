import type { Metadata, sendUnaryData, ServerUnaryCall, ServerWritableStream, ServiceDefinition, UntypedServiceImplementation } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Logger } from "pino";
import { InvalidArgumentError } from "../../contract/errors.js";
import { isInternal, toServiceError } from "../../contract/grpc-status.js";
import { requestIdOf, traceContextOf } from "../../contract/metadata.js";
import type { Handlers, RequestContext, ServerStreamHandler, UnaryHandler } from "../../contract/request-context.js";
import { lazyChild } from "../../contract/lazy-logger.js";
import { NO_TURN, type Turn } from "../../contract/tenant-limits.js";

/**
 * The method's authorization rule (authorization.ts): proves who calls — from the credentials in
 * `metadata` and, where the rule needs it, the request (the owner a registration claims, the
 * session a host token must cover) — and returns the principal handlers get, or throws
 * UNAUTHENTICATED / PERMISSION_DENIED / INVALID_ARGUMENT. `peer` is the client certificate the TLS
 * layer verified; `peerAddress` is grpc-js `getPeer()` (`ip:port`, `unknown` for a unix socket),
 * which a host token is bound to.
 */
export type Authorize<P> = (method: string, request: unknown, metadata: Metadata, peer: PeerCertificate | undefined, peerAddress?: string) => P;

export interface BindOptions<P> {
  logger: Logger;
  authorize: Authorize<P>;
  /**
   * The call's turn at doing work (TenantLimits.turn), taken after authorization and before the
   * request is decoded; the handler gets it as `ctx.turn` and the adapter ends it when the handler
   * settles. Without it every call has its turn at once.
   */
  turn?: (principal: P, signal: AbortSignal) => Promise<Turn>;
}

/**
 * Binds typed async handlers (contract/request-context.ts) to a grpc-js service: the last step of
 * the server's middleware, after the interceptors (request id, tracing, metrics and access log;
 * interceptors.ts) have run for the call. Per call it builds the RequestContext — the caller's
 * deadline and cancellation as one AbortSignal, a child logger, the trace context — runs the
 * method's authorization rule, calls the handler, and maps whatever it throws to a gRPC status in
 * the one place that does (contract/grpc-status.ts). Internal errors are logged here with their
 * stack; every call's outcome is logged once by the access log.
 */
export function bindService<Def extends ServiceDefinition, P>(
  definition: Def,
  handlers: Handlers<Def, P>,
  options: BindOptions<P>,
): UntypedServiceImplementation {
  const impl: UntypedServiceImplementation = {};
  for (const name of Object.keys(definition) as (keyof Def & string)[]) {
    const method = definition[name];
    const handler = handlers[name] as unknown;
    impl[name] = method.responseStream
      ? streamAdapter(method.path, handler as ServerStreamHandler<unknown, unknown, P>, options)
      : unaryAdapter(method.path, handler as UnaryHandler<unknown, unknown, P>, options);
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

function context<P>(path: string, call: CallLike, options: BindOptions<P>, controller: AbortController): RequestContext<P> {
  if (call.request instanceof UndecodableRequest) throw call.request.error();
  const request = call.request instanceof EncodedRequest ? undefined : call.request;
  const requestId = requestIdOf(call.metadata);
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const peerCertificate = call.getAuthContext?.().sslPeerCertificate;
  const principal = options.authorize(path, request, call.metadata, peerCertificate, call.getPeer?.());
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
 * Runs `handler` on the call's turn (BindOptions.turn) with its request decoded, and ends the turn
 * when the handler settles.
 */
async function onTurn<P, T>(
  request: unknown,
  ctx: RequestContext<P>,
  options: BindOptions<P>,
  handler: (request: unknown, ctx: RequestContext<P>) => Promise<T>,
): Promise<T> {
  const turn = options.turn ? await options.turn(ctx.principal, ctx.signal) : NO_TURN;
  try {
    return await handler(decodedRequest(request), { ...ctx, turn });
  } finally {
    turn.leave();
  }
}

function unaryAdapter<P>(path: string, handler: UnaryHandler<unknown, unknown, P>, options: BindOptions<P>) {
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
    const fail = (err: unknown) => {
      answered = true;
      if (isInternal(err)) (ctx?.log ?? options.logger).error({ err, method: path }, "internal error");
      callback(toServiceError(err, { deadlineMs: ctx?.deadlineMs }), null);
    };
    try {
      ctx = context(path, call, options, controller);
      onTurn(call.request, ctx, options, handler).then((res) => {
        answered = true;
        callback(null, res);
      }, fail);
    } catch (err) {
      fail(err);
    }
  };
}

function streamAdapter<P>(path: string, handler: ServerStreamHandler<unknown, unknown, P>, options: BindOptions<P>) {
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
      ctx = context(path, call, options, controller);
      const sink = {
        write: (m: unknown) => void call.write(m),
        closed: closed.signal,
        get backlog() {
          return call.writableLength;
        },
      };
      onTurn(call.request, ctx, options, (request, turnCtx) => handler(request, turnCtx, sink)).then(() => {
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
