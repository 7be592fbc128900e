import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ContextdClient } from "../../../src/sdk/runtime-client.js";
import { contextTool, expandTool, historyTools, searchTool, sessionsTool } from "../../../src/sdk/history-tools.js";

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return new Promise((r) => server.close(() => r(port)));
}

describe("history tools: definitions shared by every framework adapter", () => {
  it("are search, expand, context and sessions, each with a model-facing description and a JSON Schema derivable from its zod input", () => {
    expect(historyTools.map((t) => t.name)).toEqual(["search", "expand", "context", "sessions"]);
    for (const tool of historyTools) {
      expect(tool.description.length).toBeGreaterThan(150);
      const schema = z.toJSONSchema(tool.inputSchema) as { type: string; properties: Record<string, { description?: string }>; additionalProperties: boolean };
      expect(schema.type).toBe("object");
      expect(schema.additionalProperties).toBe(false);
      for (const [name, prop] of Object.entries(schema.properties)) expect(prop.description, `${tool.name}.${name}`).toBeTruthy();
    }
    const search = z.toJSONSchema(searchTool.inputSchema) as unknown as { required: string[]; properties: { query: { maxLength: number } } };
    expect(search.required).toEqual(["query"]);
    expect(search.properties.query.maxLength).toBe(512);
    expect((z.toJSONSchema(expandTool.inputSchema) as { required: string[] }).required).toEqual(["entry_id"]);
  });

  it("bad input is an error result naming the argument, never a throw, and contextd is not called", async () => {
    // A client to a port nothing listens on: reaching contextd would be a different error.
    const client = new ContextdClient({ address: `127.0.0.1:${await closedPort()}`, timeoutMs: 2_000 });
    try {
      const cases: Array<[typeof searchTool | typeof expandTool | typeof contextTool | typeof sessionsTool, unknown, RegExp]> = [
        [searchTool, { query: "" }, /^Invalid argument query: query must not be empty/],
        [searchTool, { query: "x".repeat(513) }, /^Invalid argument query: query: at most 512 characters/],
        [searchTool, {}, /^Invalid argument query: query is required/],
        [searchTool, { query: "a", limit: 51 }, /^Invalid argument limit/],
        [searchTool, { query: "a", bogus: 1 }, /^Invalid argument arguments: unknown argument "bogus"/],
        [expandTool, { entry_id: "e1", session_id: "s", page_token: "not ours" }, /^Invalid argument page_token/],
        [contextTool, { session_id: "s", page_token: "zzz" }, /^Invalid argument page_token/],
        [sessionsTool, { limit: 0 }, /^Invalid argument limit/],
        [searchTool, { query: "a" }, /^Invalid argument session_id: no current session here/],
      ];
      for (const [tool, input, expected] of cases) {
        const res = await tool.run(client, input);
        expect(res.isError, JSON.stringify(input)).toBe(true);
        expect(res.text).toMatch(expected);
      }
    } finally {
      client.close();
    }
  });

  it("contextd unreachable is an error result saying so", async () => {
    const client = new ContextdClient({ address: `127.0.0.1:${await closedPort()}`, timeoutMs: 2_000 });
    try {
      const res = await searchTool.run(client, { query: "invoice" }, { sessionId: "chat" });
      expect(res).toMatchObject({ isError: true });
      expect(res.text).toMatch(/^Error: (contextd is unreachable|contextd did not answer in time)/);
    } finally {
      client.close();
    }
  });
});
