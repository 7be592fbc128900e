import { credentials as grpcCredentials, ServerCredentials, type ChannelCredentials } from "@grpc/grpc-js";
import pino, { type Logger } from "pino";
import type { Awaitable } from "./engine-definition.js";

/**
 * How `serveEngine` serves and registers. Every field is optional; the registry connection falls
 * back to the SDK environment variables (named on each field below), so the same engine binary
 * runs under contextd's managed sidecars, docker-compose or by hand.
 */
export interface ServeEngineOptions {
  /** contextd's address (host:port or unix:/path). Env `CONTEXTD_REGISTRY`. Absent or "": serve only, do not register. */
  registry?: string;
  /** The owner the engine id is registered for. Env `CONTEXTD_OWNER`. Required to register. */
  owner?: string;
  /** Proves the owner: sent as `authorization: Bearer <token>`. Env `CONTEXTD_OWNER_TOKEN`. */
  ownerToken?: string;
  /**
   * Where to serve: host:port or unix:/path. Env `CONTEXTD_ENGINE_LISTEN`; default `127.0.0.1:0`
   * (port 0 picks a free port; the registered endpoint is the real one).
   */
  listen?: string;
  /**
   * The endpoint to register when the registry must dial something other than the bound address
   * (a container or service name). Env `CONTEXTD_ENGINE_ADVERTISE`.
   */
  advertise?: string;
  /**
   * Which instance of the engine this process is, when several serve one engine id: stable across
   * its restarts (a pod name). Env `CONTEXTD_ENGINE_INSTANCE_ID`; default: its endpoint
   * (docs/registry.md, "Instances").
   */
  instanceId?: string;
  /**
   * Where it runs, so each contextd replica calls the instance beside it first. Env
   * `CONTEXTD_ENGINE_NODE`, `CONTEXTD_ENGINE_ZONE`, `CONTEXTD_ENGINE_REPLICA` (the contextd replica
   * it sits beside: that replica's `engines.locality.replica`).
   */
  locality?: { node?: string; zone?: string; replica?: string };
  /** Replace this owner's existing registration of this instance (a restarted engine). Default true. */
  allowSameOwnerRefresh?: boolean;
  /** How often to check that the registry still has this engine (and register again if not). Default 2000. */
  heartbeatMs?: number;
  /** Backoff while the registry is unreachable: from `initialMs` (200), doubling up to `maxMs` (5000), with jitter. */
  retry?: { initialMs?: number; maxMs?: number };
  /** SIGTERM/SIGINT → deregister, drain, exit 0. Default true. */
  handleSignals?: boolean;
  /** How long stop() lets in-flight calls finish before cancelling them. Default 5000. */
  drainTimeoutMs?: number;
  /** Default: pino JSON on stderr named after the engine id, level from env `CONTEXTD_LOG_LEVEL` (info). */
  logger?: Logger;
  /** Channel credentials for calls to the registry and to the host. Default: plaintext. */
  credentials?: ChannelCredentials;
  /** Server credentials (TLS/mTLS) for the engine's own port. Default: plaintext. */
  serverCredentials?: ServerCredentials;
  /** Largest request/response the engine accepts or sends. Default 64 MiB. */
  maxMessageBytes?: number;
  /** Runs once, after the server drained on stop() or a signal (close databases, flush files). */
  onShutdown?: () => Awaitable<void>;
  /** Where the environment variables are read from. Default `process.env`. */
  env?: Record<string, string | undefined>;
}

export type ListenAddress = { kind: "unix"; target: string } | { kind: "tcp"; host: string; port: number };

export interface ResolvedOptions {
  registry?: string;
  owner: string;
  ownerToken?: string;
  listen: ListenAddress;
  listenText: string;
  advertise?: string;
  /** "": the registry names the instance by its endpoint. */
  instanceId: string;
  locality: { node: string; zone: string; replica: string };
  allowSameOwnerRefresh: boolean;
  heartbeatMs: number;
  retry: { initialMs: number; maxMs: number };
  handleSignals: boolean;
  drainTimeoutMs: number;
  logger: Logger;
  credentials: ChannelCredentials;
  serverCredentials: ServerCredentials;
  maxMessageBytes: number;
  onShutdown?: () => Awaitable<void>;
}

function fail(problem: string): never {
  throw new Error(`serveEngine: ${problem}`);
}

function nonEmpty(value: string | undefined): string | undefined {
  const v = value?.trim();
  return v ? v : undefined;
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) fail(`\`${name}\` must be a positive number of milliseconds (got ${String(value)})`);
  return value;
}

/** host:port, [v6]:port or unix:/path. */
export function parseListen(text: string): ListenAddress {
  if (text.startsWith("unix:")) {
    if (text.length <= "unix:".length) fail(`listen address "${text}" has no socket path`);
    return { kind: "unix", target: text };
  }
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:[\]]*):(\d+)$/.exec(text);
  if (!m) fail(`listen address "${text}" is not host:port, [ipv6]:port or unix:/path`);
  const port = Number(m[2]);
  if (port > 65535) fail(`listen address "${text}" has an invalid port`);
  return { kind: "tcp", host: m[1] || "0.0.0.0", port };
}

/** The socket path of a unix: target (unix:/abs, unix:///abs or unix:relative). */
export function unixPath(target: string): string {
  const rest = target.slice("unix:".length);
  return rest.startsWith("//") ? rest.slice(2) : rest;
}

export function formatHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

const WILDCARDS: Record<string, string> = { "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1" };

/** The loopback address to register for a wildcard bind (when no `advertise` is given). */
export function registrableHost(host: string): { host: string; wildcard: boolean } {
  const loopback = WILDCARDS[host];
  return loopback ? { host: loopback, wildcard: true } : { host, wildcard: false };
}

export function defaultLogger(engineId: string, env: Record<string, string | undefined>): Logger {
  return pino(
    { name: engineId, level: nonEmpty(env.CONTEXTD_LOG_LEVEL) ?? "info", timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 2, sync: true }),
  );
}

export function resolveOptions(engineId: string, options: ServeEngineOptions): ResolvedOptions {
  if (typeof options !== "object" || options === null) fail("options must be an object");
  const env = options.env ?? process.env;
  // An explicit "" disables registration even when CONTEXTD_REGISTRY is set.
  const registry = options.registry !== undefined ? nonEmpty(options.registry) : nonEmpty(env.CONTEXTD_REGISTRY);
  const owner = nonEmpty(options.owner ?? env.CONTEXTD_OWNER) ?? "";
  if (registry && !owner) {
    fail(`registering with ${registry} needs an owner: set \`owner\` or CONTEXTD_OWNER (and usually \`ownerToken\` / CONTEXTD_OWNER_TOKEN)`);
  }
  const listenText = nonEmpty(options.listen ?? env.CONTEXTD_ENGINE_LISTEN) ?? "127.0.0.1:0";
  const retryInitial = positive("retry.initialMs", options.retry?.initialMs, 200);
  const retryMax = Math.max(retryInitial, positive("retry.maxMs", options.retry?.maxMs, 5_000));
  return {
    registry,
    owner,
    ownerToken: nonEmpty(options.ownerToken ?? env.CONTEXTD_OWNER_TOKEN),
    listen: parseListen(listenText),
    listenText,
    advertise: nonEmpty(options.advertise ?? env.CONTEXTD_ENGINE_ADVERTISE),
    instanceId: nonEmpty(options.instanceId ?? env.CONTEXTD_ENGINE_INSTANCE_ID) ?? "",
    locality: {
      node: nonEmpty(options.locality?.node ?? env.CONTEXTD_ENGINE_NODE) ?? "",
      zone: nonEmpty(options.locality?.zone ?? env.CONTEXTD_ENGINE_ZONE) ?? "",
      replica: nonEmpty(options.locality?.replica ?? env.CONTEXTD_ENGINE_REPLICA) ?? "",
    },
    allowSameOwnerRefresh: options.allowSameOwnerRefresh ?? true,
    heartbeatMs: positive("heartbeatMs", options.heartbeatMs, 2_000),
    retry: { initialMs: retryInitial, maxMs: retryMax },
    handleSignals: options.handleSignals ?? true,
    drainTimeoutMs: positive("drainTimeoutMs", options.drainTimeoutMs, 5_000),
    logger: (options.logger ?? defaultLogger(engineId, env)).child({ engineId }),
    credentials: options.credentials ?? grpcCredentials.createInsecure(),
    serverCredentials: options.serverCredentials ?? ServerCredentials.createInsecure(),
    maxMessageBytes: positive("maxMessageBytes", options.maxMessageBytes, 64 * 1024 * 1024),
    onShutdown: options.onShutdown,
  };
}
