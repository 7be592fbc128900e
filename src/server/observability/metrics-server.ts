import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

/**
 * The HTTP side of `metrics_listen`: `GET /metrics` (Prometheus text format), `/healthz` (the process
 * is up: always 200 while it answers) and `/readyz` (200 only when `ready()` says the store is
 * reachable and the gRPC server is serving; 503 with the reason otherwise) — what Kubernetes probes
 * and load balancers ask.
 */
export interface Readiness {
  ready(): Promise<{ ok: boolean; reason?: string }>;
}

/** Other pages served beside the metrics (the context explorer: src/server/explorer/explorer-http.ts). */
export interface HttpPages {
  owns(path: string): boolean;
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void>;
}

export class MetricsServer {
  private server?: http.Server;

  constructor(
    private readonly registry: Registry,
    private readonly readiness: Readiness,
    private readonly pages?: HttpPages,
  ) {}

  /** Binds `host:port` (port 0 picks one); resolves with the bound `host:port`. */
  listen(address: string): Promise<string> {
    const server = http.createServer((req, res) => void this.handle(req, res));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      const done = (bound: string) => {
        server.off("error", reject);
        resolve(bound);
      };
      if (address.startsWith("unix:")) {
        const path = address.slice("unix:".length);
        server.listen(path, () => done(address));
        return;
      }
      const at = address.lastIndexOf(":");
      const host = address.slice(0, at).replace(/^\[|\]$/g, "");
      server.listen(Number(address.slice(at + 1)), host, () => done(`${host.includes(":") ? `[${host}]` : host}:${(server.address() as AddressInfo).port}`));
    });
  }

  close(): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    return new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    const at = url.indexOf("?");
    const path = at < 0 ? url : url.slice(0, at);
    if (this.pages?.owns(path)) return this.pages.handle(req, res, path, new URLSearchParams(at < 0 ? "" : url.slice(at + 1)));
    if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "text/plain", "only GET\n");
    try {
      if (path === "/metrics") return send(res, 200, this.registry.contentType, await this.registry.metrics());
      if (path === "/healthz") return send(res, 200, "text/plain", "ok\n");
      if (path === "/readyz") {
        const r = await this.readiness.ready();
        return send(res, r.ok ? 200 : 503, "text/plain", r.ok ? "ready\n" : `not ready: ${r.reason ?? "unknown"}\n`);
      }
      return send(res, 404, "text/plain", "not found: try /metrics, /healthz or /readyz\n");
    } catch (err) {
      return send(res, 500, "text/plain", `error: ${(err as Error).message}\n`);
    }
  }
}

function send(res: http.ServerResponse, code: number, type: string, body: string): void {
  res.writeHead(code, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}
