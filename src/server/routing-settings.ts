import { hostname } from "node:os";
import type { EngineOperation } from "../registry/engine-call-observer.js";
import type { RoutingSettings } from "../registry/router.js";
import type { ContextdConfig } from "./config.js";

/** The router's view of the config: slots, per-operation deadlines, the failure policy and the bulkhead. */
export function routingSettings(config: ContextdConfig): RoutingSettings {
  const overrides: RoutingSettings["overrides"] = {};
  for (const [id, o] of Object.entries(config.engines.overrides)) {
    overrides[id] = {
      timeoutsMs: o.timeouts as Partial<Record<EngineOperation, number>> | undefined,
      onFailure: o.on_failure,
      maxConcurrentCalls: o.max_concurrent_calls,
    };
  }
  return {
    contextEngine: config.slots.context_engine,
    agents: config.slots.agents,
    timeoutsMs: config.engines.timeouts as Record<EngineOperation, number>,
    onFailure: config.engines.on_failure,
    maxConcurrentCalls: config.engines.max_concurrent_calls,
    fallbackReserveMs: config.engines.fallback_reserve,
    locality: { ...config.engines.locality, node: config.engines.locality.node || hostname() },
    overrides,
  };
}
