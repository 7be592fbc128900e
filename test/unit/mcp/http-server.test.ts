import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { allowedRequests } from "../../../src/mcp/http-server.js";

function req(host: string | undefined, extra: { origin?: string; method?: string; url?: string } = {}): IncomingMessage {
  return {
    headers: { ...(host === undefined ? {} : { host }), ...(extra.origin ? { origin: extra.origin } : {}) },
    method: extra.method ?? "POST",
    url: extra.url ?? "/mcp",
  } as IncomingMessage;
}

describe("the MCP HTTP endpoint's request check (DNS rebinding, path, method)", () => {
  const loopback = allowedRequests({ host: "127.0.0.1" }, 8750);

  it("bound to loopback: accepts the loopback names with the bound port only", () => {
    for (const host of ["127.0.0.1:8750", "localhost:8750", "LOCALHOST:8750", "[::1]:8750"]) expect(loopback(req(host)), host).toBeUndefined();
    for (const host of ["evil.example:8750", "127.0.0.1:8751", "localhost", "127.0.0.1.evil.example:8750", "", "localhost:8750:1"])
      expect(loopback(req(host))?.status, host).toBe(403);
    expect(loopback(req(undefined))?.status).toBe(403);
  });

  it("an Origin, when sent, must be one of the accepted hosts' own origins or allowed by name", () => {
    expect(loopback(req("localhost:8750", { origin: "http://localhost:8750" }))).toBeUndefined();
    expect(loopback(req("localhost:8750", { origin: "http://evil.example" }))?.status).toBe(403);
    expect(loopback(req("localhost:8750", { origin: "null" }))?.status).toBe(403);
    expect(loopback(req("localhost:8750", { origin: "https://localhost:8750" }))?.status).toBe(403);
    const withOrigin = allowedRequests({ host: "127.0.0.1", allowedOrigins: ["https://app.example"] }, 8750);
    expect(withOrigin(req("localhost:8750", { origin: "https://app.example" }))).toBeUndefined();
  });

  it("bound elsewhere: only the bound address and the names allowed; localhost is not implied", () => {
    const wide = allowedRequests({ host: "10.0.0.5", allowedHosts: ["mcp.internal"] }, 80);
    expect(wide(req("10.0.0.5"))).toBeUndefined();
    expect(wide(req("mcp.internal:80"))).toBeUndefined();
    expect(wide(req("localhost:80"))?.status).toBe(403);
  });

  it("serves POST /mcp only: 404 elsewhere, 405 for GET and DELETE (stateless)", () => {
    expect(loopback(req("localhost:8750", { url: "/mcp?x=1" }))).toBeUndefined();
    expect(loopback(req("localhost:8750", { url: "/other" }))?.status).toBe(404);
    expect(loopback(req("localhost:8750", { method: "GET" }))?.status).toBe(405);
    expect(loopback(req("localhost:8750", { method: "DELETE" }))?.status).toBe(405);
  });
});
