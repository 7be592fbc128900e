import { readFile } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The explorer's prebuilt front end (`npm run build` writes it to dist/explorer with Vite from
 * explorer/): served as files, never templated, under a Content-Security-Policy that allows only this
 * origin's own scripts, styles and fetches — no inline script, no other host.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Headers every explorer answer carries (the API's JSON too). */
export const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json",
};

/** dist/explorer, next to dist/src (this file is dist/src/server/explorer/explorer-static.js). */
export const DEFAULT_EXPLORER_ROOT = fileURLToPath(new URL("../../../explorer/", import.meta.url));

export class ExplorerFiles {
  private readonly cache = new Map<string, Buffer>();

  constructor(private readonly root: string = DEFAULT_EXPLORER_ROOT) {}

  /** The file at `path` (relative to the explorer's root; "" is index.html), or undefined. */
  async get(path: string): Promise<{ body: Buffer; type: string } | undefined> {
    const rel = path === "" ? "index.html" : path;
    // Only files below the root: no "..", no absolute paths, no dot files.
    const clean = normalize(rel);
    if (clean.startsWith("..") || clean.includes(`${sep}.`) || clean.startsWith(".") || rel.includes("\0")) return undefined;
    const type = TYPES[extname(clean)];
    if (!type) return undefined;
    let body = this.cache.get(clean);
    if (!body) {
      body = await readFile(join(this.root, clean)).catch(() => undefined);
      if (!body) return undefined;
      this.cache.set(clean, body);
    }
    return { body, type };
  }
}
