import { Metadata, status as Status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import type http from "node:http";
import { callUnary, CHANNEL_OPTIONS, channelCredentials, type ClientOptions } from "../../contract/client-call.js";
import {
  ClearQuarantineRequest,
  DeregisterEngineRequest,
  EngineEvent,
  EngineStatus,
  ListEnginesRequest,
  QuarantineEngineRequest,
  RegistryServiceClient,
  WatchEnginesRequest,
  type WatchEnginesResponse,
} from "../../contract/gen/contextd/v1/registry.js";
import { ExpandCompactionResponse, SearchOrder, SearchScope, SearchTranscriptResponse } from "../../contract/gen/contextd/v1/search.js";
import { CompactResponse, GetSessionResponse, GetTranscriptResponse, ListSessionsResponse } from "../../contract/gen/contextd/v1/session.js";
import { ContextdError } from "../../contract/errors.js";
import { statusOf } from "../../contract/grpc-status.js";
import { bearerToken } from "../../contract/metadata.js";
import { previewContext } from "../../sdk/assembled-context.js";
import { ContextdClient } from "../../sdk/runtime-client.js";
import { newToken, type Authenticator } from "../auth.js";
import type { EngineLatency } from "../observability/engine-latency.js";
import type { CsrfTokens } from "./csrf.js";

/**
 * The explorer's JSON API (`/explorer/api/…`): each route is one call (or, for the context preview,
 * the calls `contextctl context` makes) to contextd's own gRPC services over a private socket,
 * carrying the browser's bearer token. So the explorer has no logic of its own to keep in step:
 * the RPC's authorization rule, the session visibility of a runtime token (only its agents'
 * sessions), validation, limits and errors are the gRPC API's, answered as JSON. Reads are GET;
 * actions are POST with the CSRF token (csrf.ts).
 *
 * One addition: SessionService takes runtime tokens only, and an operator sees every session. So
 * for a token the Authenticator proves an operator's, the session calls carry the explorer's own
 * runtime credential (every agent, registered at start, never leaves the process); the registry
 * calls always carry the browser's token. Compacting a session from the explorer is an operator
 * action: a runtime token is refused here, before the call.
 */

/** Largest POST body (an action's JSON: a reason, a budget). */
const MAX_BODY_BYTES = 16 * 1024;
const PAGE_SIZE_MAX = 500;
/** Deadline of the calls the explorer makes (a compaction may run a summarizer). */
const READ_TIMEOUT_MS = 30_000;
const ACTION_TIMEOUT_MS = 180_000;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = "INVALID_ARGUMENT",
  ) {
    super(message);
  }
}

/** gRPC status → HTTP status, for the API's answers. */
const HTTP_OF: Partial<Record<Status, number>> = {
  [Status.INVALID_ARGUMENT]: 400,
  [Status.OUT_OF_RANGE]: 400,
  [Status.UNAUTHENTICATED]: 401,
  [Status.PERMISSION_DENIED]: 403,
  [Status.NOT_FOUND]: 404,
  [Status.ALREADY_EXISTS]: 409,
  [Status.FAILED_PRECONDITION]: 409,
  [Status.ABORTED]: 409,
  [Status.RESOURCE_EXHAUSTED]: 429,
  [Status.UNIMPLEMENTED]: 501,
  [Status.UNAVAILABLE]: 503,
  [Status.DEADLINE_EXCEEDED]: 504,
};

export function errorAnswer(err: unknown): { status: number; body: { code: string; message: string } } {
  if (err instanceof HttpError) return { status: err.status, body: { code: err.code, message: err.message } };
  if (err instanceof ContextdError) err = statusOf(err);
  const e = err as Partial<ServiceError>;
  if (typeof e.code === "number") {
    return { status: HTTP_OF[e.code as Status] ?? 500, body: { code: Status[e.code] ?? String(e.code), message: e.details ?? e.message ?? "" } };
  }
  return { status: 500, body: { code: "INTERNAL", message: (err as Error).message } };
}

interface Request {
  method: string;
  /** Path segments after /explorer/api/, decoded. */
  parts: string[];
  query: URLSearchParams;
  /** The browser's bearer token ("" when none). */
  token: string;
  body: Record<string, unknown>;
}

type Json = unknown;

export class ExplorerApi {
  private readonly sessions: ContextdClient;
  private readonly registry: RegistryServiceClient;
  private readonly options: ClientOptions;

  /** The explorer's runtime credential (agents "*"), used for an operator's session calls. */
  private readonly ownToken = newToken();
  private readonly revokeOwnToken: () => void;

  /** `address`: where contextd's gRPC server answers the explorer (a private unix socket). */
  constructor(
    address: string,
    private readonly csrf: CsrfTokens,
    private readonly auth: Authenticator,
    /** Each engine's latency from this process's metrics (engine-latency.ts). */
    private readonly latency: () => Promise<EngineLatency> = async () => ({}),
  ) {
    this.revokeOwnToken = auth.addRuntimeToken("explorer", this.ownToken, ["*"]);
    this.options = { address, timeoutMs: READ_TIMEOUT_MS };
    this.sessions = new ContextdClient(this.options);
    this.registry = new RegistryServiceClient(address, channelCredentials(this.options), CHANNEL_OPTIONS);
  }

  close(): void {
    this.revokeOwnToken();
    this.sessions.close();
    this.registry.close();
  }

  /** Answers `req` (its path after `/explorer/api/` in `rest`). */
  async handle(req: http.IncomingMessage, res: http.ServerResponse, rest: string, query: URLSearchParams): Promise<void> {
    const token = bearerOf(req);
    const method = req.method ?? "GET";
    const parts = rest.split("/").map((p) => decodeSegment(p));
    if (method === "GET" && parts.length === 2 && parts[0] === "engines" && parts[1] === "events") return this.engineEvents(req, res, token);
    // An action's origin and CSRF token are checked before its body is read.
    if (method === "POST") this.checkAction(req, token);
    else if (method !== "GET") throw new HttpError(405, "only GET (reads) and POST (actions)", "METHOD_NOT_ALLOWED");
    const body = method === "POST" ? await readBody(req) : {};
    const answer = await this.route({ method, parts, query, token, body });
    sendJson(res, 200, answer);
  }

  /**
   * An action must come from this origin's page: a JSON body, the CSRF token for the caller's
   * credential, and (when the browser says) a same-origin fetch.
   */
  private checkAction(req: http.IncomingMessage, token: string): void {
    const site = req.headers["sec-fetch-site"];
    if (site !== undefined && site !== "same-origin") throw new HttpError(403, `cross-site action refused (sec-fetch-site: ${String(site)})`, "CSRF");
    const origin = req.headers.origin;
    if (origin !== undefined && originHost(origin) !== req.headers.host)
      throw new HttpError(403, "cross-origin action refused (origin is not this host)", "CSRF");
    const csrf = req.headers["x-csrf-token"];
    if (!this.csrf.verify(token, typeof csrf === "string" ? csrf : undefined))
      throw new HttpError(403, "missing or stale x-csrf-token: reload the page (GET /explorer/api/info gives it)", "CSRF");
  }

  /** Whether `token` is an operator's (with auth off, everyone is). */
  private isOperator(token: string): boolean {
    try {
      this.auth.operator(bearerMetadata(token));
      return true;
    } catch {
      return false;
    }
  }

  /** The token SessionService calls carry for the browser's `token` (see the class comment). */
  private sessionCall(token: string, timeoutMs = READ_TIMEOUT_MS) {
    return this.call(this.isOperator(token) ? this.ownToken : token, timeoutMs);
  }

  private call(token: string, timeoutMs = READ_TIMEOUT_MS) {
    return { metadata: bearerMetadata(token), timeoutMs };
  }

  private async route(r: Request): Promise<Json> {
    const [head, id, sub] = r.parts;
    const o = this.sessionCall(r.token);
    if (r.method === "GET") {
      if (head === "info" && r.parts.length === 1)
        return { authRequired: this.auth.required, operator: this.isOperator(r.token), csrfToken: this.csrf.issue(r.token) };
      if (head === "sessions" && r.parts.length === 1) {
        const res = await this.sessions.listSessions({ pageSize: pageSize(r.query, 100), pageToken: r.query.get("pageToken") ?? "" }, o);
        return ListSessionsResponse.toJSON(res);
      }
      if (head === "sessions" && id && r.parts.length === 2)
        return GetSessionResponse.toJSON(await this.sessions.getSession({ session: { sessionId: id } }, o));
      if (head === "sessions" && id && sub === "context" && r.parts.length === 3) {
        const budget = intParam(r.query, "budget", 1, 100_000_000);
        const prompt = r.query.get("prompt");
        // auto_compact false: looking never compacts the session (contextctl context without --compact).
        const { ctx } = await previewContext(this.sessions, id, { budget, autoCompact: false, prompt: prompt || undefined }, o);
        return ctx;
      }
      if (head === "sessions" && id && sub === "transcript" && r.parts.length === 3) {
        const res = await this.sessions.getTranscript(
          { session: { sessionId: id }, pageSize: pageSize(r.query, 50), pageToken: r.query.get("pageToken") ?? "" },
          o,
        );
        return GetTranscriptResponse.toJSON(res);
      }
      if (head === "sessions" && id && sub === "search" && r.parts.length === 3) {
        const scope = r.query.get("scope") === "agent" ? SearchScope.SEARCH_SCOPE_AGENT : SearchScope.SEARCH_SCOPE_SESSION;
        const res = await this.sessions.searchTranscript(
          {
            session: { sessionId: id },
            query: r.query.get("q") ?? "",
            scope,
            order: SearchOrder.SEARCH_ORDER_RELEVANCE,
            pageSize: pageSize(r.query, 20),
            pageToken: r.query.get("pageToken") ?? "",
          },
          o,
        );
        return SearchTranscriptResponse.toJSON(res);
      }
      if (head === "sessions" && id && sub === "compactions" && r.parts.length === 4) {
        const res = await this.sessions.expandCompaction(
          { session: { sessionId: id }, compactionEntryId: r.parts[3], pageSize: pageSize(r.query, 50), pageToken: r.query.get("pageToken") ?? "" },
          o,
        );
        return ExpandCompactionResponse.toJSON(res);
      }
      if (head === "engines" && r.parts.length === 1) {
        const res = await callUnary(this.registry, this.registry.listEngines, ListEnginesRequest.fromPartial({}), this.options, this.call(r.token));
        return { engines: res.engines.map((e) => EngineStatus.toJSON(e)), latency: await this.latency() };
      }
    }
    if (r.method === "POST") {
      const a = this.call(r.token, ACTION_TIMEOUT_MS);
      if (head === "engines" && id && r.parts.length === 3) {
        if (sub === "isolate") {
          const req = QuarantineEngineRequest.fromPartial({ engineId: id, reason: stringField(r.body, "reason", 1024) });
          const res = await callUnary(this.registry, this.registry.quarantineEngine, req, this.options, a);
          return { engine: res.engine ? EngineStatus.toJSON(res.engine) : null };
        }
        if (sub === "release") {
          const res = await callUnary(this.registry, this.registry.clearQuarantine, ClearQuarantineRequest.fromPartial({ engineId: id }), this.options, a);
          return { engine: res.engine ? EngineStatus.toJSON(res.engine) : null };
        }
        if (sub === "deregister") {
          const res = await callUnary(this.registry, this.registry.deregisterEngine, DeregisterEngineRequest.fromPartial({ engineId: id }), this.options, a);
          return { deregistered: res.deregistered };
        }
      }
      if (head === "sessions" && id && sub === "compact" && r.parts.length === 3) {
        this.auth.operator(bearerMetadata(r.token));
        const budget = numberField(r.body, "budget", 1, 100_000_000);
        // As `contextctl compact ID --budget N --force`: the session's stored agent routes it.
        const res = await this.sessions.compact({ session: { sessionId: id }, tokenBudget: budget, force: true }, this.sessionCall(r.token, ACTION_TIMEOUT_MS));
        return CompactResponse.toJSON(res);
      }
    }
    throw new HttpError(404, `no such API route: ${r.method} /explorer/api/${r.parts.join("/")}`, "NOT_FOUND");
  }

  /**
   * `GET /explorer/api/engines/events`: WatchEngines (with the current engines first) as
   * server-sent events, one `data:` line of EngineEvent JSON per event; the stream's end status as
   * an `event: end`. Read with fetch (EventSource cannot send the bearer header).
   */
  private engineEvents(req: http.IncomingMessage, res: http.ServerResponse, token: string): Promise<void> {
    const metadata = bearerMetadata(token);
    const stream = this.registry.watchEngines(WatchEnginesRequest.fromPartial({ includeCurrent: true }), metadata);
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" });
    res.write(": contextd engine events\n\n");
    return new Promise<void>((resolve) => {
      let error: ServiceError | undefined;
      const stop = () => stream.cancel();
      req.on("close", stop);
      stream.on("data", (m: WatchEnginesResponse) => {
        if (m.event) res.write(`data: ${JSON.stringify(EngineEvent.toJSON(m.event))}\n\n`);
      });
      stream.on("error", (err: ServiceError) => (error = err));
      stream.on("status", (s: StatusObject) => {
        req.off("close", stop);
        const end =
          s.code === Status.OK || s.code === Status.CANCELLED ? { code: "OK", message: "" } : errorAnswer(error ?? { code: s.code, details: s.details }).body;
        if (!res.destroyed) res.end(`event: end\ndata: ${JSON.stringify(end)}\n\n`);
        resolve();
      });
    });
  }
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

function bearerMetadata(token: string): Metadata {
  const metadata = new Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

function bearerOf(req: http.IncomingMessage): string {
  const value = req.headers.authorization;
  if (!value) return "";
  const md = new Metadata();
  md.set("authorization", value);
  const token = bearerToken(md);
  if (!token) throw new HttpError(401, "malformed authorization header: send 'Authorization: Bearer <token>'", "UNAUTHENTICATED");
  return token;
}

function decodeSegment(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    throw new HttpError(400, `malformed path segment ${JSON.stringify(p.slice(0, 64))}`);
  }
}

function originHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

function pageSize(q: URLSearchParams, fallback: number): number {
  return q.has("pageSize") ? intParam(q, "pageSize", 1, PAGE_SIZE_MAX) : fallback;
}

function intParam(q: URLSearchParams, name: string, min: number, max: number): number {
  const raw = q.get(name);
  const n = raw === null || raw.trim() === "" ? NaN : Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new HttpError(400, `${name}: an integer from ${min} to ${max} is required (got ${JSON.stringify(raw?.slice(0, 32) ?? null)})`);
  return n;
}

function stringField(body: Record<string, unknown>, name: string, maxLength: number): string {
  const v = body[name] ?? "";
  if (typeof v !== "string") throw new HttpError(400, `${name}: a string is required`);
  if (v.length > maxLength) throw new HttpError(400, `${name}: at most ${maxLength} characters`);
  return v;
}

function numberField(body: Record<string, unknown>, name: string, min: number, max: number): number {
  const v = body[name];
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) throw new HttpError(400, `${name}: an integer from ${min} to ${max} is required`);
  return v;
}

async function readBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const type = req.headers["content-type"] ?? "";
  if (!/^application\/json\b/i.test(type)) throw new HttpError(415, "an action's body is JSON (content-type: application/json)", "UNSUPPORTED_MEDIA_TYPE");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `an action's body is at most ${MAX_BODY_BYTES} bytes`, "TOO_LARGE");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, "the body is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new HttpError(400, "the body is a JSON object");
  return parsed as Record<string, unknown>;
}
