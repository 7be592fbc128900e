import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

/**
 * The history tools over MCP's Streamable HTTP transport, **stateless**: every POST to `/mcp` gets
 * a server and transport of its own that live as long as the request (the SDK's stateless mode,
 * no `Mcp-Session-Id`). Why stateless: the tools are plain request/answer reads and the server
 * sends nothing unasked, so a session would only be memory held per client — memory a client could
 * grow without bound, and state a second instance behind a load balancer would not have. Page
 * tokens carry all the state a tool needs. So GET (a server-to-client stream) and DELETE (ending a
 * session) are 405.
 *
 * What it checks before the SDK sees a request, per the MCP spec's security warning for HTTP:
 * - `Host` must name the address it is bound to — its IP, or `localhost` for a loopback address —
 *   or one of `allowedHosts`, with the bound port: a DNS-rebinding page on another name is refused (403).
 * - `Origin`, when sent (browsers send it), must be `http://<an allowed host>:<port>` or one of
 *   `allowedOrigins` (403 otherwise).
 * - The body is at most `maxBodyBytes` (413, checked by the transport while reading), at most
 *   `maxInFlight` requests are served at once (503 beyond, with Retry-After), and a request's
 *   headers and body must arrive within the server's timeouts.
 * Authentication is not its job: it acts with the token it was started with, for whoever can reach
 * it — hence 127.0.0.1 by default (docs/mcp.md).
 */
export interface HttpServeOptions {
  host: string;
  /** 0: any free port (the bound one is in the answer's `url`). */
  port: number;
  /** Host names accepted besides the bound address (and `localhost` when that is loopback). */
  allowedHosts?: string[];
  /** Origins accepted besides `http://<allowed host>:<port>`. */
  allowedOrigins?: string[];
  /** Default 1 MiB. */
  maxBodyBytes?: number;
  /** Default 32. */
  maxInFlight?: number;
  /** Told of requests that failed inside the server (not of refused ones). */
  onError?: (err: unknown) => void;
}

export interface HttpServing {
  /** `http://host:port/mcp`. */
  url: string;
  close(): Promise<void>;
}

export const MCP_PATH = "/mcp";
const DEFAULT_MAX_BODY = 1024 * 1024;
const DEFAULT_MAX_IN_FLIGHT = 32;

export async function serveHttp(makeServer: () => McpServer, opts: HttpServeOptions): Promise<HttpServing> {
  const maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  let inFlight = 0;
  let allowed: ReturnType<typeof allowedRequests> | undefined;

  const http = createServer((req, res) => {
    const refusal = allowed ? allowed(req) : { status: 503, message: "starting" };
    if (refusal) return reply(res, refusal.status, refusal.message);
    if (inFlight >= maxInFlight) {
      res.setHeader("retry-after", "1");
      return reply(res, 503, "too many requests in flight");
    }
    inFlight++;
    res.on("close", () => inFlight--);
    void handle(req, res);
  });
  // A client that trickles its headers or body is cut off rather than holding a connection.
  http.headersTimeout = 10_000;
  http.requestTimeout = 60_000;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, maxRequestBodySize: opts.maxBodyBytes ?? DEFAULT_MAX_BODY });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch (err) {
      opts.onError?.(err);
      if (!res.headersSent) reply(res, 500, "internal error");
    }
  }

  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(opts.port, opts.host, () => {
      http.off("error", reject);
      resolve();
    });
  });
  const bound = http.address() as AddressInfo;
  allowed = allowedRequests(opts, bound.port);
  const hostPart = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
  return {
    url: `http://${hostPart}:${bound.port}${MCP_PATH}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

/** The check every request passes first: undefined when it may go on, else the status to answer. */
export function allowedRequests(opts: Pick<HttpServeOptions, "host" | "allowedHosts" | "allowedOrigins">, port: number) {
  const names = new Set<string>([normalHost(opts.host), ...(opts.allowedHosts ?? []).map(normalHost)]);
  if (isLoopback(opts.host)) for (const n of ["localhost", "127.0.0.1", "[::1]"]) names.add(n);
  const origins = new Set<string>([...[...names].map((n) => `http://${n}:${port}`), ...(opts.allowedOrigins ?? []).map((o) => o.toLowerCase())]);
  return (req: IncomingMessage): { status: number; message: string } | undefined => {
    const host = req.headers.host ?? "";
    const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d+))?$/i.exec(host);
    if (!m || !names.has(normalHost(m[1])) || Number(m[2] ?? 80) !== port) return { status: 403, message: "Host not allowed" };
    const origin = req.headers.origin;
    if (origin !== undefined && !origins.has(origin.toLowerCase())) return { status: 403, message: "Origin not allowed" };
    const path = (req.url ?? "").split("?")[0];
    if (path !== MCP_PATH) return { status: 404, message: `not found: the MCP endpoint is ${MCP_PATH}` };
    if (req.method !== "POST") return { status: 405, message: "method not allowed: this server is stateless (POST only)" };
    return undefined;
  };
}

function normalHost(h: string): string {
  const lower = h.toLowerCase();
  return lower.includes(":") && !lower.startsWith("[") ? `[${lower}]` : lower;
}

function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\./.test(h);
}

/** A JSON-RPC error body, as the SDK answers refused requests. */
function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json", ...(status === 405 ? { allow: "POST" } : {}) });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}
