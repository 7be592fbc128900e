import { tool, type ToolSet } from "ai";
import type { ContextdClient } from "contextd/client";
import { historyTools, type HistoryToolDefaults } from "contextd/tools";

/**
 * contextd's history tools — `search`, `expand`, `context`, `sessions` (src/sdk/history-tools.ts,
 * the same definitions the MCP server and OpenClaw use) — as AI SDK tools, bound to a session:
 * `generateText({ tools: { ...contextdTools(client, { sessionId }) } })`. A failed call (bad
 * input, unknown session, contextd unreachable) is a tool error the model reads, never a throw out
 * of the loop.
 */
export function contextdTools(client: ContextdClient, defaults: HistoryToolDefaults = {}): ToolSet {
  const tools: ToolSet = {};
  for (const t of historyTools) {
    tools[t.name] = tool({
      description: t.description,
      inputSchema: t.inputSchema,
      execute: async (input: unknown, { abortSignal }) => {
        const result = await t.run(client, input, defaults, { signal: abortSignal });
        // The SDK hands a thrown error to the model as the tool's error output.
        if (result.isError) throw new Error(result.text);
        return result.text;
      },
    });
  }
  return tools;
}
