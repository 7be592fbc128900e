import { clientFor, parseConfig } from "./config.js";
import { createEngine, ENGINE_ID } from "./engine.js";
import type { PluginApi } from "./openclaw-api.js";

/**
 * The OpenClaw plugin entry (openclaw 2026.9.x): registers the `contextd` context engine. Select
 * it with `plugins.slots.contextEngine: "contextd"`; configure it under
 * `plugins.entries.contextd.config` (see README.md). `register` must stay synchronous: OpenClaw
 * ignores registrations made after it returns.
 */
export default {
  id: ENGINE_ID,
  name: "contextd",
  description: "Context engine backed by contextd: OpenClaw's context, compaction and recall decided by a contextd service over gRPC",
  register(api: PluginApi): void {
    const config = parseConfig(api.pluginConfig);
    api.registerContextEngine(ENGINE_ID, async (ctx) => createEngine(await clientFor(config, ctx.config ?? api.config), config, api.logger));
  },
};
