import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type LabelValues } from "prom-client";
import type { HostObserver } from "../../host/host-observer.js";
import type { CountPoolStats } from "../../tokens/tokenizer.js";

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

  /** The host's observer: appends and compactions (src/host/host-observer.ts). */
  hostObserver(): HostObserver {
    return {
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
   * The engine gauges read the registry when Prometheus scrapes: one series per known engine
   * (quarantined 1/0; health 1 SERVING, 0 NOT_SERVING, -1 UNKNOWN), so an engine that goes away
   * drops out instead of keeping its last value.
   */
  watchEngines(list: () => { id: string; quarantined: boolean; health: number }[]): void {
    const quarantined = this.engineQuarantined as unknown as { collect?: () => void };
    const health = this.engineHealth as unknown as { collect?: () => void };
    const gq = this.engineQuarantined;
    const gh = this.engineHealth;
    quarantined.collect = () => {
      gq.reset();
      for (const e of list()) gq.set({ engine: e.id }, e.quarantined ? 1 : 0);
    };
    health.collect = () => {
      gh.reset();
      for (const e of list()) gh.set({ engine: e.id }, e.health);
    };
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
      (counter as unknown as { collect?: () => void }).collect = () => {
        counter.reset();
        counter.inc(pick(stats() ?? EMPTY_COUNT_STATS));
      };
    }
    const chars = this.tokenCountChars;
    (chars as unknown as { collect?: () => void }).collect = () => {
      const s = stats() ?? EMPTY_COUNT_STATS;
      chars.reset();
      chars.inc({ outcome: "counted" }, s.countedChars);
      chars.inc({ outcome: "dropped" }, s.droppedChars);
    };
    const pending = this.tokenCountPending;
    (pending as unknown as { collect?: () => void }).collect = () => pending.set((stats() ?? EMPTY_COUNT_STATS).pendingChars);
  }

  /** `contextd_rpc_in_flight` reads `active` at scrape time: nothing on the call path. */
  watchInFlight(active: () => number): void {
    const g = this.rpcInFlight;
    (g as unknown as { collect?: () => void }).collect = () => g.set(active());
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
