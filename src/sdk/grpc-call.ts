import { credentials as grpcCredentials, Metadata, status, type ChannelCredentials, type Client, type ServiceError } from "@grpc/grpc-js";

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
  timeoutMs?: number;
  signal?: AbortSignal;
  metadata?: Metadata;
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: { deadline: Date },
  callback: (error: ServiceError | null, response: Res) => void,
) => { cancel(): void };

export function channelCredentials(options: ClientOptions): ChannelCredentials {
  return options.credentials ?? grpcCredentials.createInsecure();
}

/** TLS channel credentials: `ca` to trust (default: the system roots), `cert` + `key` for mTLS. */
export function tlsCredentials(pem: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {}): ChannelCredentials {
  return grpcCredentials.createSsl(pem.ca ?? null, pem.key ?? null, pem.cert ?? null);
}

/** Promise form of one unary call with a deadline, bearer metadata and AbortSignal cancellation. */
export function callUnary<Req, Res>(client: Client, method: UnaryMethod<Req, Res>, request: Req, defaults: ClientOptions, options: CallOptions = {}): Promise<Res> {
  const metadata = options.metadata?.clone() ?? new Metadata();
  if (defaults.token && !metadata.get("authorization").length) metadata.set("authorization", `Bearer ${defaults.token}`);
  const deadline = new Date(Date.now() + (options.timeoutMs ?? defaults.timeoutMs ?? 30_000));
  const signal = options.signal;
  // Already cancelled: never send it, so the server cannot act on a call nobody waits for.
  if (signal?.aborted) return Promise.reject(Object.assign(new Error("1 CANCELLED: cancelled before it was sent"), { code: status.CANCELLED, details: "cancelled before it was sent", metadata: new Metadata() }));
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
