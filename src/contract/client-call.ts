import { credentials as grpcCredentials, Metadata, status, type ChannelCredentials, type Client, type ServiceError } from "@grpc/grpc-js";
import { outgoingMetadata } from "./metadata.js";

/**
 * The one path of every outgoing gRPC call contextd's code makes — the registry to engines and
 * their health, engines (SDK) to the registry and HostService, runtimes (the client) and contextctl
 * to contextd — with one set of channel options.
 */
export const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
  "grpc.max_send_message_length": 64 * 1024 * 1024,
  // Reconnect within seconds when the peer (re)starts, instead of backing off for up to two minutes.
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2_000,
} as const;

export interface ClientOptions {
  /** host:port or unix:/path. */
  address: string;
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  /** Default: plaintext (local development). */
  credentials?: ChannelCredentials;
  /** Per-call deadline when the call does not give one. Default 30 s. */
  timeoutMs?: number;
}

export interface CallOptions {
  /** The deadline, from now; `deadlineMs` wins when both are set. */
  timeoutMs?: number;
  /** The deadline as epoch ms. */
  deadlineMs?: number;
  signal?: AbortSignal;
  metadata?: Metadata;
  /** The W3C trace context to continue (`traceparent`, `tracestate`). */
  trace?: Record<string, string>;
}

export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: { deadline: Date },
  callback: (error: ServiceError | null, response: Res) => void,
) => { cancel(): void };

export function channelCredentials(options: Pick<ClientOptions, "credentials">): ChannelCredentials {
  return options.credentials ?? grpcCredentials.createInsecure();
}

/** TLS channel credentials: `ca` to trust (default: the system roots), `cert` + `key` for mTLS. */
export function tlsCredentials(pem: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {}): ChannelCredentials {
  return grpcCredentials.createSsl(pem.ca ?? null, pem.key ?? null, pem.cert ?? null);
}

/** Promise form of one unary call with a deadline, bearer and trace metadata, and AbortSignal cancellation. */
export function callUnary<Req, Res>(
  client: Client,
  method: UnaryMethod<Req, Res>,
  request: Req,
  defaults: ClientOptions,
  options: CallOptions = {},
): Promise<Res> {
  const metadata = outgoingMetadata({ token: defaults.token, trace: options.trace, base: options.metadata });
  const deadline = new Date(options.deadlineMs ?? Date.now() + (options.timeoutMs ?? defaults.timeoutMs ?? 30_000));
  const signal = options.signal;
  // Already cancelled: never send it, so the server cannot act on a call nobody waits for.
  if (signal?.aborted)
    return Promise.reject(
      Object.assign(new Error("1 CANCELLED: cancelled before it was sent"), {
        code: status.CANCELLED,
        details: "cancelled before it was sent",
        metadata: new Metadata(),
      }),
    );
  return new Promise<Res>((resolve, reject) => {
    const onAbort = () => call.cancel();
    const call = method.call(client, request, metadata, { deadline }, (err, res) => {
      signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve(res);
    });
    if (signal?.aborted) call.cancel();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}
