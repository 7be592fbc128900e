import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import type { ContextdClient } from "contextd/client";
import { historyTools, type HistoryToolDefaults } from "contextd/tools";

export interface ContextdToolsOptions extends HistoryToolDefaults {
  /** Put before each tool's name (`search` → `history_search`), to keep clear of the agent's own tools. Default "". */
  namePrefix?: string;
}

/**
 * contextd's history tools — `search`, `expand`, `context`, `sessions` (contextd/tools, the same
 * definitions the MCP server, the OpenClaw plugin and the other integrations use) — as LangChain
 * tools, bound to a session: `createAgent({ tools: [...contextdTools(client, { sessionId })] })`.
 * A failed call (bad input, unknown session, contextd unreachable) comes back to the model as a
 * ToolMessage with `status: "error"` saying what to fix, never a throw out of the agent loop.
 */
export function contextdTools(client: ContextdClient, options: ContextdToolsOptions = {}): StructuredToolInterface[] {
  const { namePrefix = "", ...defaults } = options;
  return historyTools.map((t) => {
    const name = namePrefix + t.name;
    return tool(
      async (input: unknown, config) => {
        const result = await t.run(client, input, defaults, { signal: config?.signal });
        const id = config?.toolCall?.id;
        if (result.isError && id) return new ToolMessage({ content: result.text, tool_call_id: id, name, status: "error" });
        return result.isError ? `Error: ${result.text}` : result.text;
      },
      { name, description: t.description, schema: t.inputSchema },
    ) as unknown as StructuredToolInterface;
  });
}
