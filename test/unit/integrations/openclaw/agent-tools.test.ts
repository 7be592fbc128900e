/**
 * The plugin's agent tools without OpenClaw (integrations/openclaw/src/agent-tools.ts): what the
 * factory OpenClaw calls for a run builds, that the manifest declares every tool the plugin
 * registers (OpenClaw refuses undeclared ones), and how a failed call reaches OpenClaw. The tools
 * in the real OpenClaw: test/openclaw/openclaw-history-tools.test.ts.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_TOOL_NAMES, agentToolFactory } from "../../../../integrations/openclaw/src/agent-tools.js";
import { parseConfig } from "../../../../integrations/openclaw/src/config.js";
import { expandTool, searchTool } from "../../../../src/sdk/history-tools.js";
import { ContextdClient } from "../../../../src/sdk/runtime-client.js";

const manifest = JSON.parse(readFileSync(new URL("../../../../integrations/openclaw/openclaw.plugin.json", import.meta.url), "utf8")) as {
  contracts: { tools: string[] };
  toolMetadata: Record<string, unknown>;
  configSchema: { properties: Record<string, { type?: string }> };
};

describe("the plugin's agent tools", () => {
  // A loopback port with nothing behind it: every call fails UNAVAILABLE at once.
  let dead: ContextdClient;
  beforeAll(async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (srv.address() as net.AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    dead = new ContextdClient({ address: `127.0.0.1:${port}`, timeoutMs: 5_000 });
  });
  afterAll(() => dead?.close());

  const tools = (raw: Record<string, unknown> = {}, ctx = { sessionId: "s-1", sessionKey: "agent:main:chat" }) =>
    agentToolFactory(parseConfig(raw), async () => dead)(ctx);

  it("are contextd_search and contextd_expand, every one declared in the manifest's contracts.tools and toolMetadata", () => {
    expect(AGENT_TOOL_NAMES).toEqual(["contextd_search", "contextd_expand"]);
    expect(manifest.contracts.tools).toEqual(AGENT_TOOL_NAMES);
    expect(Object.keys(manifest.toolMetadata).sort()).toEqual([...AGENT_TOOL_NAMES].sort());
    expect(tools()!.map((t) => t.name)).toEqual(AGENT_TOOL_NAMES);
  });

  it("carry the shared tools' descriptions and input schemas, as JSON Schema", () => {
    const [search, expand] = tools()!;
    expect(search.description).toContain(searchTool.description);
    expect(expand.description).toContain(expandTool.description);
    expect(search.label).toBe(searchTool.title);
    expect(search.parameters).toMatchObject({ type: "object", required: ["query"], additionalProperties: false });
    expect(Object.keys(search.parameters.properties as object)).toEqual(Object.keys(searchTool.inputSchema.shape));
    expect(expand.parameters).toMatchObject({ type: "object", required: ["entry_id"] });
    expect(search.parameters).not.toHaveProperty("$schema");
    // Never deferred behind OpenClaw's Tool Search catalog.
    expect([search.catalogMode, expand.catalogMode]).toEqual(["direct-only", "direct-only"]);
  });

  it("historyTools: false registers none (the factory answers null); any other value than a boolean is refused", () => {
    expect(tools({ historyTools: false })).toBeNull();
    expect(parseConfig({}).historyTools).toBe(true);
    expect(() => parseConfig({ historyTools: "no" })).toThrow(/historyTools must be true or false/);
    expect(manifest.configSchema.properties.historyTools).toMatchObject({ type: "boolean" });
  });

  it("a failed call is thrown with the text that says why, as OpenClaw expects of a tool", async () => {
    const [search] = tools()!;
    await expect(search.execute("call-1", { query: "BILL-4821" })).rejects.toThrow(/contextd is unreachable/);
    await expect(search.execute("call-2", { query: "" })).rejects.toThrow(/query must not be empty/);
    const [unbound] = tools({}, { sessionId: "", sessionKey: "" })!;
    await expect(unbound.execute("call-3", { query: "x" })).rejects.toThrow(/no current session/);
  });
});
