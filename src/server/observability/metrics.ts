import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type LabelValues } from "prom-client";
import { EngineHealth, type EngineStatus } from "../../contract/gen/contextd/v1/registry.js";
import type { HostObserver } from "../../host/host-observer.js";
import { isDegraded } from "../../registry/engine-call-observer.js";
import type { CountPoolStats } from "../../tokens/tokenizer.js";
import type { SpendObserver } from "../../llm/model-spend.js";

/**
 * Series per instance are kept for at most this many instances of one engine (the first by instance
 * id): an instance label is a value an owner chose, so its cardinality is capped here as well as by
 * `engines.max_instances`. The rest are in the engine's own series and `contextd_engine_instances`.
 */
export const MAX_INSTANCE_SERIES = 64;

/** One instance of an engine as the scrape-time gauges read it (from EngineInstance). */
export interface InstanceGauges {
  id: string;
  quarantined: boolean;
  /** 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN. */
  health: number;
  outstanding: number;
  calls: number;
  failures: number;
  timeouts: number;
}

/** One engine as the scrape-time gauges read it (from EngineStatus). */
export interface EngineGauges {
  id: string;
  quarantined: boolean;
  /** 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN. */
  health: number;
  /** Its instances, by instance id; none for `legacy`. */
  instances: InstanceGauges[];
  /** Serving with too few of its instances (the router's panic threshold): said, not acted on. */
  degraded: boolean;
}

const HEALTH_VALUE: Record<number, number> = {
  [EngineHealth.ENGINE_HEALTH_SERVING]: 1,
  [EngineHealth.ENGINE_HEALTH_NOT_SERVING]: 0,
  [EngineHealth.ENGINE_HEALTH_UNKNOWN]: -1,
};

/**
 * An engine's gauges as its EngineStatus says: quarantined when no instance is free (or an operator
 * isolated it), the best instance's health; each instance as EngineInstance says.
 */
export function engineGauges(s: EngineStatus): EngineGauges {
  const instances = s.instances.map((i) => ({
    id: i.instanceId,
    quarantined: i.quarantine !== undefined,
    health: HEALTH_VALUE[i.health] ?? -1,
    outstanding: i.outstandingCalls,
    calls: i.calls,
    failures: i.failures,
    timeouts: i.timeouts,
  }));
  const serving = instances.filter((i) => !i.quarantined).length;
  return {
    id: s.engineId,
    quarantined: s.quarantine !== undefined,
    health: HEALTH_VALUE[s.health] ?? -1,
    instances,
    degraded: s.quarantine === undefined && isDegraded(serving, instances.length),
  };
}

/** The counting pool's totals when contextd counts inline (no pool). */
const EMPTY_COUNT_STATS: CountPoolStats = { countedChars: 0, droppedChars: 0, droppedJobs: 0, chunks: 0, threadFailures: 0, pendingChars: 0 };

/**
 * contextd's Prometheus series (docs/operations.md lists them), in one registry. Names and labels
 * follow the go-grpc-prometheus convention for the gRPC server series, so existing dashboards work;
 * every label value is bounded (service and method names, engine ids, operations, outcomes — never
 * a session id).
 *
 * Hot paths take children from `child()`, which caches them by label values: a labelled
 * increment is then one Map lookup, not prom-client's per-call label hashing.
 */
export class ContextdMetrics {
  readonly registry = new Registry();

  readonly grpcHandled = new Counter({
    name: "grpc_server_handled_total",
    help: "RPCs completed on the server, by service, method and status code.",
    labelNames: ["grpc_type", "grpc_service", "grpc_method", "grpc_code"] as const,
    registers: [this.registry],
  });
  readonly grpcHandling = new Histogram({
    name: "grpc_server_handling_seconds",
    help: "Time from receiving an RPC to answering it.",
    labelNames: ["grpc_type", "grpc_service", "grpc_method"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
    registers: [this.registry],
  });
  readonly rpcShed = new Counter({
    name: "contextd_rpc_shed_total",
    help: "RPCs refused RESOURCE_EXHAUSTED unprocessed because server.max_concurrent_calls were in flight, by service and method.",
    labelNames: ["grpc_service", "grpc_method"] as const,
    registers: [this.registry],
  });
  readonly rpcInFlight = new Gauge({
    name: "contextd_rpc_in_flight",
    help: "RPCs in flight that count against server.max_concurrent_calls (read at scrape time).",
    registers: [this.registry],
  });
  readonly engineCalls = new Counter({
    name: "contextd_engine_calls_total",
    help: "Calls to context engines, by engine, operation and outcome (ok, error, timeout, contract, cancelled, short).",
    labelNames: ["engine", "operation", "outcome"] as const,
    registers: [this.registry],
  });
  readonly engineCallDuration = new Histogram({
    name: "contextd_engine_call_duration_seconds",
    help: "Duration of calls to context engines.",
    labelNames: ["engine", "operation"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
    registers: [this.registry],
  });
  readonly engineFallbacks = new Counter({
    name: "contextd_engine_fallbacks_total",
    help: "Calls answered by legacy instead of the selected engine, by the selected engine, operation and reason (quarantined, not_registered, error, timeout, contract, rejected, short).",
    labelNames: ["engine", "operation", "reason"] as const,
    registers: [this.registry],
  });
  readonly engineQuarantined = new Gauge({
    name: "contextd_engine_quarantined",
    help: "1 while the engine is quarantined, else 0.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly engineHealth = new Gauge({
    name: "contextd_engine_health",
    help: "The engine's last health check: 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly engineFailovers = new Counter({
    name: "contextd_engine_failovers_total",
    help: "Calls one instance of an engine could not answer (failed, at its bulkhead, ejected meanwhile) sent to another instance of it, by engine and operation.",
    labelNames: ["engine", "operation"] as const,
    registers: [this.registry],
  });
  readonly engineInstances = new Gauge({
    name: "contextd_engine_instances",
    help: "The engine's live instances by state: serving (not quarantined) or quarantined.",
    labelNames: ["engine", "state"] as const,
    registers: [this.registry],
  });
  readonly engineDegraded = new Gauge({
    name: "contextd_engine_degraded",
    help: "1 while the engine serves with fewer than half of its instances (the rest quarantined): one more ejection may leave it to legacy.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly instanceCalls = new Counter({
    name: "contextd_engine_instance_calls_total",
    help: "Calls this replica made to one instance of an engine since it was registered here.",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly instanceFailures = new Counter({
    name: "contextd_engine_instance_failures_total",
    help: "Calls to one instance that failed through its fault (errors, timeouts, answers that break the contract).",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly instanceTimeouts = new Counter({
    name: "contextd_engine_instance_timeouts_total",
    help: "Failures of one instance that were timeouts.",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly instanceOutstanding = new Gauge({
    name: "contextd_engine_instance_outstanding_calls",
    help: "Calls of this replica in flight to one instance now: what the router balances on.",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly instanceQuarantined = new Gauge({
    name: "contextd_engine_instance_quarantined",
    help: "1 while one instance is quarantined (its own ejection, or its engine's), else 0.",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly instanceHealth = new Gauge({
    name: "contextd_engine_instance_health",
    help: "One instance's last health check: 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN.",
    labelNames: ["engine", "instance"] as const,
    registers: [this.registry],
  });
  readonly modelRequests = new Counter({
    name: "contextd_model_requests_total",
    help: "HTTP requests to the summarizer model (retries included), by purpose (summary: a compaction's model summary; complete: HostService.Complete).",
    labelNames: ["purpose"] as const,
    registers: [this.registry],
  });
  readonly modelTokens = new Counter({
    name: "contextd_model_tokens_total",
    help: "Tokens the summarizer model reported (input + output), by purpose.",
    labelNames: ["purpose"] as const,
    registers: [this.registry],
  });
  readonly modelSpendLimited = new Counter({
    name: "contextd_model_spend_limited_total",
    help: "Model calls refused by an agent's compaction.summarizer.limits, by purpose (a summary then falls back to extractive).",
    labelNames: ["purpose"] as const,
    registers: [this.registry],
  });
  readonly compactions = new Counter({
    name: "contextd_compactions_total",
    help: "Compactions by the engine that produced them and outcome (committed, nothing, conflict, failed, discarded).",
    labelNames: ["engine", "outcome"] as const,
    registers: [this.registry],
  });
  readonly compactionTokensBefore = new Counter({
    name: "contextd_compaction_tokens_before_total",
    help: "Tokens of the active view before committed compactions.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly compactionTokensAfter = new Counter({
    name: "contextd_compaction_tokens_after_total",
    help: "Tokens of the active view after committed compactions.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly compactionDuration = new Histogram({
    name: "contextd_compaction_duration_seconds",
    help: "Duration of compactions, by the engine that produced them.",
    labelNames: ["engine"] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
    registers: [this.registry],
  });
  readonly appendedMessages = new Counter({ name: "contextd_appended_messages_total", help: "Messages appended to transcripts.", registers: [this.registry] });
  readonly appendedTokens = new Counter({
    name: "contextd_appended_tokens_total",
    help: "Tokens of the messages appended to transcripts.",
    registers: [this.registry],
  });
  readonly storeOperationDuration = new Histogram({
    name: "contextd_store_operation_duration_seconds",
    help: "Duration of transcript store operations.",
    labelNames: ["operation"] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [this.registry],
  });
  readonly tokenCountChars = new Counter({
    name: "contextd_token_count_chars_total",
    help: "Characters of token counting on the counting threads, by outcome: counted, or dropped because the caller had gone.",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly tokenCountPending = new Gauge({
    name: "contextd_token_count_pending_chars",
    help: "Characters accepted for token counting and not answered yet.",
    registers: [this.registry],
  });
  readonly tokenCountDroppedJobs = new Counter({
    name: "contextd_token_count_dropped_jobs_total",
    help: "Token counting jobs dropped because their caller cancelled or its deadline passed.",
    registers: [this.registry],
  });
  readonly tokenCountChunks = new Counter({
    name: "contextd_token_count_chunks_total",
    help: "Chunks of token counting (at most 16 KiB of text each) counted by the counting threads.",
    registers: [this.registry],
  });
  readonly tokenCountThreadFailures = new Counter({
    name: "contextd_token_count_thread_failures_total",
    help: "Token counting threads that failed or exited and were replaced.",
    registers: [this.registry],
  });
  readonly sessionsDeleted = new Counter({
    name: "contextd_sessions_deleted_total",
    help: "Sessions deleted, by reason: deleted (DeleteSession, with its subagents), subagent (EndSubagent DELETED, a rolled-back spawn), retention_idle, retention_age.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly forgetDeliveries = new Counter({
    name: "contextd_forget_deliveries_total",
    help: "ForgetSession delivery attempts, by engine and outcome: delivered (acknowledged), unsupported (the engine does not declare capabilities.forget), failed (retried later).",
    labelNames: ["engine", "outcome"] as const,
    registers: [this.registry],
  });
  readonly forgetPending = new Gauge({
    name: "contextd_forget_deliveries_pending",
    help: "ForgetSession deliveries recorded and not yet acknowledged, across replicas (counted at most every 2 s).",
    registers: [this.registry],
  });
  readonly sessions: Gauge;

  private readonly children = new Map<string, unknown>();

  /**
   * `sessions` reads the number of sessions from the store when Prometheus scrapes, at most once
   * per `sessionsTtlMs`: counting is a query, and scrapes may come from several Prometheus servers.
   */
  constructor(countSessions: () => Promise<number>, sessionsTtlMs = 2_000) {
    collectDefaultMetrics({ register: this.registry });
    let cached = { at: 0, value: 0 };
    this.sessions = new Gauge({
      name: "contextd_sessions",
      help: "Sessions in the store (counted at most every 2 s).",
      registers: [this.registry],
      async collect() {
        if (Date.now() - cached.at >= sessionsTtlMs) {
          try {
            cached = { at: Date.now(), value: await countSessions() };
          } catch {
            // The store is down: readiness says so; keep the last value.
          }
        }
        this.set(cached.value);
      },
    });
  }

  /** The summarizer model's spend (src/llm/model-spend.ts). */
  spendObserver(): SpendObserver {
    return {
      spent: (purpose, requests, tokens) => {
        this.child(this.modelRequests, { purpose }).inc(requests);
        this.child(this.modelTokens, { purpose }).inc(tokens);
      },
      limited: (purpose) => this.child(this.modelSpendLimited, { purpose }).inc(),
    };
  }

  /** The pending ForgetSession deliveries, read from the store when scraped (at most every 2 s). */
  watchForgetDeliveries(countPending: () => Promise<number>, ttlMs = 2_000): void {
    let cached = { at: 0, value: 0 };
    const gauge = this.forgetPending;
    (gauge as unknown as { collect: () => Promise<void> }).collect = async () => {
      if (Date.now() - cached.at >= ttlMs) {
        try {
          cached = { at: Date.now(), value: await countPending() };
        } catch {
          // The store is down: keep the last value.
        }
      }
      gauge.set(cached.value);
    };
  }

  /** The host's observer: appends, compactions, deletions and forget deliveries (src/host/host-observer.ts). */
  hostObserver(): HostObserver {
    return {
      sessionsDeleted: (cause, count) => this.child(this.sessionsDeleted, { reason: cause }).inc(count),
      forgetDelivery: (engineId, outcome) => this.child(this.forgetDeliveries, { engine: engineId, outcome }).inc(),
      appended: (messages, tokens) => {
        this.appendedMessages.inc(messages);
        this.appendedTokens.inc(tokens);
      },
      compaction: (engineId, outcome, tokensBefore, tokensAfter, seconds) => {
        this.child(this.compactions, { engine: engineId, outcome }).inc();
        if (outcome === "committed") {
          this.child(this.compactionTokensBefore, { engine: engineId }).inc(tokensBefore);
          this.child(this.compactionTokensAfter, { engine: engineId }).inc(tokensAfter);
        }
        if (seconds !== undefined) this.child(this.compactionDuration, { engine: engineId }).observe(seconds);
      },
    };
  }

  /**
   * The engine and instance series read the registry when Prometheus scrapes: one series per known
   * engine (quarantined 1/0; health 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN; instances by state;
   * degraded 1/0) and per instance (at most MAX_INSTANCE_SERIES of an engine), so an engine or an
   * instance that goes away drops out instead of keeping its last value.
   */
  watchEngines(list: () => EngineGauges[]): void {
    const perEngine: [Gauge<"engine">, (e: EngineGauges) => number][] = [
      [this.engineQuarantined, (e) => (e.quarantined ? 1 : 0)],
      [this.engineHealth, (e) => e.health],
      [this.engineDegraded, (e) => (e.degraded ? 1 : 0)],
    ];
    for (const [gauge, value] of perEngine) {
      onScrape(gauge, () => {
        gauge.reset();
        for (const e of list()) gauge.set({ engine: e.id }, value(e));
      });
    }
    const byState = this.engineInstances;
    onScrape(byState, () => {
      byState.reset();
      for (const e of list()) {
        if (e.instances.length === 0) continue;
        const quarantined = e.instances.filter((i) => i.quarantined).length;
        byState.set({ engine: e.id, state: "serving" }, e.instances.length - quarantined);
        byState.set({ engine: e.id, state: "quarantined" }, quarantined);
      }
    });
    const perInstance: [Gauge<"engine" | "instance"> | Counter<"engine" | "instance">, (i: InstanceGauges) => number][] = [
      [this.instanceCalls, (i) => i.calls],
      [this.instanceFailures, (i) => i.failures],
      [this.instanceTimeouts, (i) => i.timeouts],
      [this.instanceOutstanding, (i) => i.outstanding],
      [this.instanceQuarantined, (i) => (i.quarantined ? 1 : 0)],
      [this.instanceHealth, (i) => i.health],
    ];
    for (const [metric, value] of perInstance) {
      onScrape(metric, () => {
        metric.reset();
        for (const e of list()) {
          for (const i of e.instances.slice(0, MAX_INSTANCE_SERIES)) {
            const labels = { engine: e.id, instance: i.id };
            if (metric instanceof Gauge) metric.set(labels, value(i));
            else metric.inc(labels, value(i));
          }
        }
      });
    }
  }

  /**
   * The token counting pool's totals (src/tokens/count-pool.ts), read at scrape time:
   * `contextd_token_count_chars_total{outcome}` — characters counted, or dropped because their
   * caller had gone (cancelled, deadline passed) — plus jobs dropped, chunks counted, threads
   * replaced and characters not counted yet.
   */
  watchTokenCounting(stats: () => CountPoolStats | undefined): void {
    const totals: [Counter, (s: CountPoolStats) => number][] = [
      [this.tokenCountDroppedJobs, (s) => s.droppedJobs],
      [this.tokenCountChunks, (s) => s.chunks],
      [this.tokenCountThreadFailures, (s) => s.threadFailures],
    ];
    for (const [counter, pick] of totals) {
      onScrape(counter, () => {
        counter.reset();
        counter.inc(pick(stats() ?? EMPTY_COUNT_STATS));
      });
    }
    const chars = this.tokenCountChars;
    onScrape(chars, () => {
      const s = stats() ?? EMPTY_COUNT_STATS;
      chars.reset();
      chars.inc({ outcome: "counted" }, s.countedChars);
      chars.inc({ outcome: "dropped" }, s.droppedChars);
    });
    const pending = this.tokenCountPending;
    onScrape(pending, () => pending.set((stats() ?? EMPTY_COUNT_STATS).pendingChars));
  }

  /** `contextd_rpc_in_flight` reads `active` at scrape time: nothing on the call path. */
  watchInFlight(active: () => number): void {
    const g = this.rpcInFlight;
    onScrape(g, () => g.set(active()));
  }

  /** The child of `metric` for these label values, created once. */
  child<T extends string, M extends Counter<T> | Histogram<T> | Gauge<T>>(metric: M, labels: LabelValues<T>): ReturnType<M["labels"]> {
    const key = `${(metric as unknown as { name: string }).name}\u0000${Object.values(labels).join("\u0000")}`;
    let c = this.children.get(key);
    if (!c) {
      c = (metric as unknown as { labels(l: LabelValues<T>): unknown }).labels(labels);
      this.children.set(key, c);
    }
    return c as ReturnType<M["labels"]>;
  }
}

/** Runs `collect` whenever Prometheus scrapes `metric` (prom-client calls a metric's `collect` then). */
function onScrape(metric: Counter<string> | Gauge<string>, collect: () => void): void {
  (metric as unknown as { collect?: () => void }).collect = collect;
}
