import { hostname } from "node:os";
import type { CompactionSettings } from "../compaction/native-compaction.js";
import type { TenantLimitSettings } from "../contract/tenant-limits.js";
import type { AppendLimits } from "../host/validate.js";
import type { RetentionLimits, RetentionSettings } from "../host/retention.js";
import type { QuotaSettings } from "../host/agent-quotas.js";
import type { AnswerLimits } from "../registry/answer-limits.js";
import type { EngineOperation } from "../registry/engine-call-observer.js";
import type { HealthSettings } from "../registry/health-monitor.js";
import type { QuarantineSettings } from "../registry/quarantine.js";
import type { RoutingSettings } from "../registry/router.js";
import { reservedEngines, type ContextdConfig } from "./config.js";

/**
 * What contextd runs with, compiled once from the validated config (config-schema.ts holds every
 * default; loadConfig validates and fills them in) into the shapes the components take — so the
 * wiring in contextd.ts converts nothing, and each component's settings type, declared where the
 * component is, is the one place its options are named. Options → defaults → compiled settings, as
 * Temporal's SDK does.
 *
 * The sections kept in the config's own words (auth, tls, the store URL, the summarizer, managed
 * sidecars, tracing) are handed on as they are: their consumers read those shapes.
 */
export interface ContextdSettings {
  listen: string;
  metricsListen: string;
  /** `explorer.enabled`: the context explorer on the metrics_listen server. */
  explorer: boolean;
  /** Where engines call HostService (defaults from `listen`). */
  hostEndpoint: string;
  tls: ContextdConfig["tls"];
  store: string;
  auth: ContextdConfig["auth"];
  tokenizer: { name: ContextdConfig["tokenizer"]; imageTokens: number };
  compaction: CompactionSettings;
  summarizer: ContextdConfig["compaction"]["summarizer"];
  limits: AppendLimits;
  tenants: TenantLimitSettings;
  routing: RoutingSettings;
  quarantine: QuarantineSettings;
  engineHealth: HealthSettings;
  /** `engines.allow_endpoints` as written (endpoint-allow-list.ts parses it). */
  allowEndpoints: ContextdConfig["engines"]["allow_endpoints"];
  engineTls: ContextdConfig["engines"]["tls"];
  answerLimits: AnswerLimits;
  /** Engine ids reserved for an owner ([id, owner]): managed sidecars' and `engines.reserved`. */
  reservedEngines: Array<[string, string]>;
  managed: ContextdConfig["engines"]["managed"];
  reconcileIntervalMs: number;
  /** `engines.max_instances`. */
  maxEngineInstances: number;
  subagentSweepIntervalMs: number;
  /** `retention`: what the sweep deletes, and how often it looks (src/host/retention.ts). */
  retention: RetentionSettings;
  /** `forget`: how ForgetSession deliveries are polled and retried (src/host/forget-delivery.ts). */
  forget: { pollIntervalMs: number; backoffInitialMs: number; backoffMaxMs: number };
  server: {
    maxConcurrentCalls: number;
    maxConcurrentStreams?: number;
    heapGrowthPercent: number;
  };
  /** contextd's own health and SIGTERM drain (ms). */
  health: { storePingIntervalMs: number; storePingTimeoutMs: number; drainDelayMs: number; shutdownGraceMs: number };
  tracing: { otlpEndpoint?: string; serviceName: string };
  quotas: QuotaSettings;
  /** How long audit records are kept (ms). */
  auditRetentionMs: number;
}

export function compileSettings(config: ContextdConfig): ContextdSettings {
  const e = config.engines;
  const overrides: RoutingSettings["overrides"] = {};
  for (const [id, o] of Object.entries(e.overrides)) {
    overrides[id] = {
      timeoutsMs: o.timeouts as Partial<Record<EngineOperation, number>>,
      ...(o.on_failure ? { onFailure: o.on_failure } : {}),
      ...(o.max_concurrent_calls !== undefined ? { maxConcurrentCalls: o.max_concurrent_calls } : {}),
    };
  }
  const tenant = config.limits.tenant;
  return {
    listen: config.listen,
    metricsListen: config.metrics_listen,
    explorer: config.explorer.enabled,
    hostEndpoint: config.host_endpoint,
    tls: config.tls,
    store: config.store,
    auth: config.auth,
    tokenizer: { name: config.tokenizer, imageTokens: config.image_tokens },
    compaction: {
      reserveTokens: config.compaction.reserve_tokens,
      keepRecentTokens: config.compaction.keep_recent_tokens,
      summaryMaxChars: config.compaction.summary_max_chars,
      coldCacheCompactRatio: config.compaction.cold_cache_compact_ratio,
    },
    summarizer: config.compaction.summarizer,
    limits: {
      maxMessageBytes: config.limits.max_message_bytes,
      maxMessagesPerAppend: config.limits.max_messages_per_append,
      maxSessionEntries: config.limits.max_session_entries,
      maxImportBytes: config.limits.max_import_bytes,
    },
    tenants: {
      maxCallsInFlight: tenant.max_calls_in_flight,
      maxCallsInFlightPerAgent: tenant.max_calls_in_flight_per_agent,
      appendBytesPerSecond: tenant.append_bytes_per_second,
      maxWatchStreams: tenant.max_watch_streams,
      maxCallsRunning: tenant.max_calls_running,
    },
    routing: {
      contextEngine: config.slots.context_engine,
      agents: config.slots.agents,
      timeoutsMs: e.timeouts as Record<EngineOperation, number>,
      onFailure: e.on_failure,
      maxConcurrentCalls: e.max_concurrent_calls,
      fallbackReserveMs: e.fallback_reserve,
      // An unnamed node is this machine's: sidecars that register with their host name are local.
      locality: { ...e.locality, node: e.locality.node || hostname() },
      overrides,
    },
    quarantine: { baseEjectionMs: e.quarantine.base_ejection, maxEjectionMs: e.quarantine.max_ejection },
    engineHealth: {
      intervalMs: e.health.interval,
      timeoutMs: e.health.timeout,
      unhealthyThreshold: e.health.unhealthy_threshold,
      removeAfterMs: e.health.remove_after,
    },
    allowEndpoints: e.allow_endpoints,
    engineTls: e.tls,
    answerLimits: { maxBytes: e.answer_limits.max_bytes, baseBytes: e.answer_limits.base_bytes, bytesPerBudgetToken: e.answer_limits.bytes_per_budget_token },
    reservedEngines: reservedEngines(config),
    managed: e.managed,
    reconcileIntervalMs: e.reconcile_interval,
    maxEngineInstances: e.max_instances,
    subagentSweepIntervalMs: config.subagents.sweep_interval,
    retention: {
      default: limits(config.retention),
      agents: Object.fromEntries(Object.entries(config.retention.agents).map(([agent, l]) => [agent, limits(l)])),
      sweepIntervalMs: config.retention.sweep_interval,
    },
    forget: {
      pollIntervalMs: config.forget.poll_interval,
      backoffInitialMs: config.forget.backoff.initial,
      backoffMaxMs: config.forget.backoff.max,
    },
    server: {
      maxConcurrentCalls: config.server.max_concurrent_calls,
      ...(config.server.max_concurrent_streams !== undefined ? { maxConcurrentStreams: config.server.max_concurrent_streams } : {}),
      heapGrowthPercent: config.server.heap_growth_percent,
    },
    health: {
      storePingIntervalMs: config.health.store_ping_interval,
      storePingTimeoutMs: config.health.store_ping_timeout,
      drainDelayMs: config.health.drain_delay,
      shutdownGraceMs: config.health.shutdown_grace,
    },
    quotas: {
      maxSessions: config.quotas.max_sessions,
      maxStoredBytes: config.quotas.max_stored_bytes,
      agents: Object.fromEntries(
        Object.entries(config.quotas.agents).map(([agent, q]) => [
          agent,
          {
            ...(q.max_sessions !== undefined ? { maxSessions: q.max_sessions } : {}),
            ...(q.max_stored_bytes !== undefined ? { maxStoredBytes: q.max_stored_bytes } : {}),
          },
        ]),
      ),
    },
    auditRetentionMs: config.audit.retention_days * 86_400_000,
    tracing: {
      ...(config.tracing?.otlp_endpoint ? { otlpEndpoint: config.tracing.otlp_endpoint } : {}),
      serviceName: config.tracing?.service_name ?? "contextd",
    },
  };
}

/** A retention entry's limits, without the unset ones. */
function limits(l: { max_idle?: number; max_age?: number }): RetentionLimits {
  return { ...(l.max_idle !== undefined ? { maxIdleMs: l.max_idle } : {}), ...(l.max_age !== undefined ? { maxAgeMs: l.max_age } : {}) };
}
