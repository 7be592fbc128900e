import type { Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Logger } from "pino";
import type { Turn } from "./tenant-limits.js";

/**
 * What every handler of contextd's services gets besides its request, built once per call by the
 * server's middleware (src/server/middleware/): a request id and a child logger, the caller's
 * deadline and cancellation as one AbortSignal, the caller's trace context, and the principal that
 * the method's authorization rule proved (what a runtime token allows, an engine call's host grant,
 * ...). Handlers hold no cross-cutting code of their own: a service's table (rpc-table.ts) states
 * what the server's pipeline does for each RPC.
 */
export interface RequestContext<P = unknown> {
  requestId: string;
  /** The full method path, e.g. `/contextd.v1.SessionService/Assemble`. */
  method: string;
  metadata: Metadata;
  /** The caller's deadline as epoch ms; Infinity when it set none. */
  deadlineMs: number;
  /** Fires when the caller cancels the call or its deadline passes. */
  signal: AbortSignal;
  log: Logger;
  /** The verified client certificate when the server runs mTLS. */
  peerCertificate?: PeerCertificate;
  /** Who is calling, as the method's authorization rule established. */
  principal: P;
  /** The W3C trace context to continue in calls made for this one (`traceparent`, `tracestate`). */
  trace: Record<string, string>;
  /**
   * The call's turn at doing work (tenant-limits.ts): the handler runs on it, and hands `turn.away`
   * to waits outside contextd. A call of a service without turns has one that never waits.
   */
  turn: Turn;
}

/** Where a server-streaming handler writes; the stream ends when the handler's promise settles. */
export interface StreamSink<Res> {
  write(message: Res): void;
  /** Messages written and not yet sent: grows while the caller does not read. */
  readonly backlog: number;
  /** Fires when the caller goes away (cancelled, closed). */
  readonly closed: AbortSignal;
}
