import { Metadata } from "@grpc/grpc-js";

/**
 * The gRPC metadata contextd reads and writes, in one place: credentials (`authorization: Bearer
 * <token>`), the request id (`x-request-id`) and the W3C trace context (`traceparent`,
 * `tracestate`). The server, the engine SDK, the runtime client and contextctl all use these.
 */
export const REQUEST_ID_KEY = "x-request-id";
export const TRACE_KEYS = ["traceparent", "tracestate"] as const;

/** The token of `authorization: Bearer <token>` (scheme case-insensitive), or undefined when absent or malformed. */
export function bearerToken(metadata: Metadata): string | undefined {
  const value = metadata.get("authorization")[0];
  if (value === undefined) return undefined;
  const m = /^Bearer[ \t]+(\S+)$/i.exec((typeof value === "string" ? value : value.toString("utf8")).trim());
  return m ? m[1] : undefined;
}

/** The first string value of `key`, or "". */
export function metadataValue(metadata: Metadata, key: string): string {
  const value = metadata.get(key)[0];
  return typeof value === "string" ? value : "";
}

/** The W3C trace context a call carries (empty when none). */
export function traceContextOf(metadata: Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of TRACE_KEYS) {
    const v = metadataValue(metadata, key);
    if (v) out[key] = v;
  }
  return out;
}

/** Metadata for an outgoing call: a bearer token, the trace context to continue, a request id. */
export function outgoingMetadata(opts: { token?: string; trace?: Record<string, string>; requestId?: string; base?: Metadata }): Metadata {
  const md = opts.base?.clone() ?? new Metadata();
  if (opts.token && md.get("authorization").length === 0) md.set("authorization", `Bearer ${opts.token}`);
  if (opts.trace) for (const [k, v] of Object.entries(opts.trace)) if (v && md.get(k).length === 0) md.set(k, v);
  if (opts.requestId && md.get(REQUEST_ID_KEY).length === 0) md.set(REQUEST_ID_KEY, opts.requestId);
  return md;
}

// Request ids only need to be unique in this process's logs: a prefix per process and a counter
// (cheaper than random bytes on every call, which showed up in the gateway profile).
const ID_PREFIX = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
let idCounter = 0;

/** The caller's `x-request-id`, or a new one. */
export function requestIdOf(metadata: Metadata): string {
  return metadataValue(metadata, REQUEST_ID_KEY) || nextRequestId();
}

export function nextRequestId(): string {
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${ID_PREFIX}-${idCounter.toString(36)}`;
}
