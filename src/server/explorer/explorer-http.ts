import type http from "node:http";
import type { ExplorerApi } from "./explorer-api.js";
import { errorAnswer, sendJson } from "./explorer-api.js";
import { SECURITY_HEADERS, type ExplorerFiles } from "./explorer-static.js";

/** Where the explorer is served on the `metrics_listen` HTTP server. */
export const EXPLORER_PREFIX = "/explorer/";

/**
 * The context explorer (`explorer.enabled`) on the `metrics_listen` HTTP server: `/explorer/` the
 * prebuilt page and its assets, `/explorer/api/…` the JSON API (explorer-api.ts). Every answer
 * carries the security headers (a strict CSP, nosniff, no framing).
 */
export class ExplorerHttp {
  constructor(
    private readonly api: ExplorerApi,
    private readonly files: ExplorerFiles,
  ) {}

  /** Whether `path` is the explorer's (then `handle` answers it). */
  owns(path: string): boolean {
    return path === "/explorer" || path.startsWith(EXPLORER_PREFIX);
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    if (path === "/explorer") {
      res.writeHead(308, { location: EXPLORER_PREFIX });
      return void res.end();
    }
    const rest = path.slice(EXPLORER_PREFIX.length);
    if (rest.startsWith("api/")) {
      try {
        return await this.api.handle(req, res, rest.slice("api/".length), query);
      } catch (err) {
        const { status, body } = errorAnswer(err);
        if (!res.headersSent) return sendJson(res, status, body);
        return void res.end();
      }
    }
    if (req.method !== "GET" && req.method !== "HEAD") return sendJson(res, 405, { code: "METHOD_NOT_ALLOWED", message: "only GET" });
    const file = await this.files.get(rest);
    if (!file) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
      return void res.end(rest === "" ? "the explorer's page is not built: run npm run build\n" : "not found\n");
    }
    // Hashed asset names change with their content: cache them; the page itself is always fresh.
    const cache = rest.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-store";
    res.writeHead(200, { "content-type": file.type, "cache-control": cache, "content-length": file.body.length });
    res.end(req.method === "HEAD" ? undefined : file.body);
  }
}
