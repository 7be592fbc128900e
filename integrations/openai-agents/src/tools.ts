import { z } from "zod";
import { tool, type FunctionTool } from "@openai/agents";
import type { ContextdClient } from "contextd/client";
import { historyTools, type HistoryToolDefaults } from "contextd/tools";

export interface ContextdToolsOptions extends HistoryToolDefaults {
  /** Put before each tool's name (`search` → `history_search`), to keep clear of the agent's own tools. Default "". */
  namePrefix?: string;
}

/**
 * contextd's history tools — `search`, `expand`, `context`, `sessions` (contextd/tools, shared with
 * the MCP server and the OpenClaw plugin) — as Agents SDK function tools, bound to a session
 * (`defaults.sessionId`, usually the ContextdSession's). The schemas go to the model as JSON Schema
 * in non-strict mode (their optional fields are not nullable); each call is validated again by the
 * shared tool, and a failure comes back to the model as text saying what to fix, never a thrown error.
 */
export function contextdTools(client: ContextdClient, options: ContextdToolsOptions = {}): FunctionTool[] {
  const { namePrefix = "", ...defaults } = options;
  return historyTools.map(
    (t) =>
      tool({
        name: namePrefix + t.name,
        description: t.description,
        parameters: { ...(z.toJSONSchema(t.inputSchema) as Record<string, unknown>), type: "object" } as never,
        strict: false,
        execute: async (input: unknown, _context, details) => {
          const result = await t.run(client, input, defaults, { signal: details?.signal });
          return result.isError ? `Error: ${result.text}` : result.text;
        },
      }) as unknown as FunctionTool,
  );
}
