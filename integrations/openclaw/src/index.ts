import { AGENT_TOOL_NAMES, agentToolFactory } from "./agent-tools.js";
import { Budgets } from "./budget.js";
import { clientFor, parseConfig } from "./config.js";
import { createEngine, ENGINE_ID, type EngineShared } from "./engine.js";
import { healthService } from "./health-service.js";
import type { PluginApi } from "./openclaw-api.js";
import { ServingLog } from "./serving-log.js";

/**
 * The OpenClaw plugin entry (openclaw 2026.9.x): registers the `contextd` context engine, the
 * agent tools `contextd_search` and `contextd_expand` over the session's whole history
 * (agent-tools.ts; off with `historyTools: false`), and — in the Gateway — a service that reports
 * whether contextd answers (health-service.ts). Select it with
 * `plugins.slots.contextEngine: "contextd"`; configure it under `plugins.entries.contextd.config`
 * (see README.md). `register` must stay synchronous: OpenClaw ignores registrations made after it
 * returns.
 */
export default {
  id: ENGINE_ID,
  name: "contextd",
  description: "Context engine backed by contextd: OpenClaw's context, compaction and recall decided by a contextd service over gRPC",
  register(api: PluginApi): void {
    const config = parseConfig(api.pluginConfig);
    // OpenClaw builds an engine per turn, /compact and subagent hook; what they learn is kept here.
    const shared: EngineShared = {
      budgets: new Budgets({ defaultTokenBudget: config.defaultTokenBudget, toolSchemaTokens: config.toolSchemaTokens }),
      serving: new ServingLog(api.logger, config.address),
    };
    api.registerContextEngine(ENGINE_ID, async (ctx) => createEngine(await clientFor(config, ctx.config ?? api.config), config, api.logger, shared));
    api.registerTool?.(
      agentToolFactory(config, (ctx) => clientFor(config, ctx.config ?? api.config)),
      { names: AGENT_TOOL_NAMES },
    );
    api.registerService?.(healthService(() => clientFor(config, api.config), config.address, config.healthCheckIntervalMs, api.logger));
  },
};
