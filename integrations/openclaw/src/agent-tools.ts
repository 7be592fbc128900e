import type { ContextdClient } from "contextd/client";
import { expandTool, searchTool, type HistoryTool } from "contextd/tools";
import { z } from "zod";
import type { AgentTool, AgentToolFactory, ToolContext } from "./openclaw-api.js";
import { agentOf } from "./openclaw-runtime.js";
import type { PluginConfig } from "./config.js";

/**
 * contextd's history tools as OpenClaw agent tools: `contextd_search` (the history of the current
 * session, or with `all_sessions` of its agent's sessions, compacted turns included) and
 * `contextd_expand` (an entry in full; for a compaction summary, the messages it stands for) — the
 * same tools as contextd's MCP server, defined once in `contextd/tools` (name, description for the
 * model, input schema, what they answer). Here they are only adapted:
 *
 * - Named `contextd_<name>`, as OpenClaw names its own tools by family (`memory_search`,
 *   `sessions_search`, `web_search`): a bare `search` would say nothing next to those, and OpenClaw
 *   skips a plugin tool whose name another tool already has. The names are declared in
 *   openclaw.plugin.json (`contracts.tools`), which OpenClaw requires of every tool a plugin registers.
 * - Bound to the turn's session: OpenClaw builds a plugin's tools for every run from a factory
 *   given the run's session id, key and agent id, so a call without `session_id` searches the
 *   conversation the model is in — the contextd session the context engine keeps under the same id.
 * - Parameters: the input schema as JSON Schema, which OpenClaw validates calls against; `run`
 *   checks the arguments again.
 * - Always in view: OpenClaw 2026.9 defers plugin tools behind its Tool Search catalog by default
 *   (the model sees `tool_search` / `tool_describe` / `tool_call` and a directory of names), which
 *   would cost a model two extra calls to reach what compaction took from it. These two are
 *   `catalogMode: "direct-only"`: their schemas go with every request (about 800 tokens together;
 *   budget.ts reserves `toolSchemaTokens` for each, as for any tool), so a model that reads a
 *   summary can look up its details at once.
 * - Failures: `run` never throws; a failed call (contextd unreachable, an unknown entry, a bad
 *   argument) answers the text that says why. The tool throws that text, which is how an OpenClaw
 *   tool reports a failure (`AgentTool.execute`: "throw on failure"): OpenClaw hands the model
 *   `{"status":"error","tool":…,"error":<the text>}`, logs the failure and the turn goes on.
 */
export const AGENT_TOOL_PREFIX = "contextd_";

const TOOLS: readonly HistoryTool[] = [searchTool, expandTool];

/** The OpenClaw names of the tools, as openclaw.plugin.json's `contracts.tools` must list them. */
export const AGENT_TOOL_NAMES = TOOLS.map((t) => AGENT_TOOL_PREFIX + t.name);

/**
 * The factory OpenClaw calls for each run. `client` resolves the plugin's shared client (its token
 * may be a SecretRef, resolved asynchronously, hence at the first call).
 */
export function agentToolFactory(config: PluginConfig, client: (ctx: ToolContext) => Promise<ContextdClient>): AgentToolFactory {
  return (ctx) => {
    if (!config.historyTools) return null;
    const defaults = {
      sessionId: ctx.sessionId || undefined,
      agentId: config.agentId ?? (ctx.agentId || agentOf(ctx.sessionKey)),
      timeoutMs: config.callTimeoutMs,
    };
    return TOOLS.map((tool): AgentTool => {
      const name = AGENT_TOOL_PREFIX + tool.name;
      return {
        name,
        label: tool.title,
        // The shared description names its sibling tools by their bare names.
        description: `${tool.description} (Here the history tools are named ${AGENT_TOOL_NAMES.join(" and ")}.)`,
        parameters: parametersOf(tool),
        catalogMode: "direct-only",
        async execute(_toolCallId, params, signal) {
          let cx: ContextdClient;
          try {
            cx = await client(ctx);
          } catch (err) {
            throw new Error(`Error: the contextd plugin cannot connect: ${err instanceof Error ? err.message : String(err)}`);
          }
          // OpenClaw's signal (the run aborted, the tool call cancelled) cancels the contextd calls.
          const res = await tool.run(cx, params, defaults, { signal });
          if (res.isError) throw new Error(res.text);
          return { content: [{ type: "text", text: res.text }], details: res.data ?? {} };
        },
      };
    });
  };
}

const schemas = new WeakMap<HistoryTool, Record<string, unknown>>();

/** The tool's input schema as JSON Schema, once per tool (OpenClaw caches its validator per schema object). */
function parametersOf(tool: HistoryTool): Record<string, unknown> {
  let schema = schemas.get(tool);
  if (!schema) {
    // `$schema` names the dialect for validators; providers' function schemas do without it.
    const { $schema: _dialect, ...rest } = z.toJSONSchema(tool.inputSchema) as Record<string, unknown>;
    schema = rest;
    schemas.set(tool, schema);
  }
  return schema;
}
