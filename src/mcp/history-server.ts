import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { historyTools, type HistoryToolDefaults } from "../sdk/history-tools.js";
import type { ContextdClient } from "../sdk/runtime-client.js";

/** The name and version an MCP client sees in `initialize` (serverInfo). */
export const SERVER_INFO = { name: "contextd", version: "0.1.0" } as const;

/** What the server tells the model about its tools as a whole (MCP `instructions`). */
const INSTRUCTIONS =
  "contextd keeps the whole history of agent conversations. When a conversation gets long, older turns are compacted into " +
  "summaries, so details fall out of the model's context — but nothing is deleted. Use `search` to find the exact words of " +
  "anything said earlier, `expand` to read an entry in full or the original messages behind a summary, `context` to see " +
  "what the model is sent now, and `sessions` to list the conversations you may read. Everything here only reads.";

/**
 * An MCP server offering the history tools (src/sdk/history-tools.ts) over `client`: one
 * registerTool per tool, the input schema the tool's own zod object (the SDK validates with it and
 * lists it as JSON Schema), the answer the tool's text — an error result (`isError`) for bad input
 * or a refusal by contextd, never a protocol error, so that the model reads what to fix.
 *
 * Every call carries the client's credentials: contextd scopes what a tool can see to its token,
 * as for any runtime.
 */
export function createHistoryServer(client: ContextdClient, defaults: HistoryToolDefaults = {}): McpServer {
  // maxToolInputElements bounds the work of validating a call's arguments (every input is a few scalars).
  const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS, maxToolInputElements: 64 });
  for (const tool of historyTools) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema,
        annotations: { title: tool.title, readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      },
      async (args: unknown, extra: { signal: AbortSignal }) => {
        const res = await tool.run(client, args, defaults, { signal: extra.signal });
        return { content: [{ type: "text" as const, text: res.text }], isError: res.isError };
      },
    );
  }
  return server;
}
