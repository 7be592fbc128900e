import type { EngineCallObserver, EngineOperation } from "../../registry/engine-call-observer.js";
import type { ContextdMetrics } from "./metrics.js";
import { inSpan, SpanKind, type Tracing } from "./tracing.js";

/**
 * The router's metrics and tracing observer (registry/engine-call-observer.ts): each engine call is counted and timed
 * (`contextd_engine_calls_total{engine,operation,outcome}`, `contextd_engine_call_duration_seconds`),
 * each fallback and each failover to another instance counted (`contextd_engine_fallbacks_total`,
 * `contextd_engine_failovers_total`), and — with tracing on — wrapped in a
 * client span with the engine id and operation, whose context the engine continues.
 */
export function engineCallMetrics(metrics: ContextdMetrics, tracing: Tracing): EngineCallObserver {
  // Children by engine and operation (and outcome), created once: label lookups are per call.
  const calls = new Map<string, { inc(): void }>();
  const durations = new Map<string, { observe(v: number): void }>();
  const fallbacks = new Map<string, { inc(): void }>();
  return {
    around<T>(
      engineId: string,
      op: EngineOperation,
      trace: Record<string, string> | undefined,
      call: (trace: Record<string, string> | undefined) => Promise<T>,
    ): Promise<T> {
      if (!tracing.enabled) return call(trace);
      return inSpan(
        tracing,
        tracing.extract(trace ?? {}),
        `engine ${engineId} ${op}`,
        SpanKind.CLIENT,
        { "contextd.engine_id": engineId, "contextd.operation": op },
        (_span, ctx) => call({ ...trace, ...tracing.inject(ctx) }),
      );
    },
    ended({ engine, op, outcome, seconds }) {
      const engineId = engine.id;
      const key = `${engineId} ${op}`;
      let c = calls.get(`${key} ${outcome}`);
      if (!c) calls.set(`${key} ${outcome}`, (c = metrics.engineCalls.labels({ engine: engineId, operation: op, outcome })));
      c.inc();
      let d = durations.get(key);
      if (!d) durations.set(key, (d = metrics.engineCallDuration.labels({ engine: engineId, operation: op })));
      d.observe(seconds);
    },
    fellBack({ selectedId, op, kind }) {
      const key = `${selectedId} ${op} ${kind}`;
      let f = fallbacks.get(key);
      if (!f) fallbacks.set(key, (f = metrics.engineFallbacks.labels({ engine: selectedId, operation: op, reason: kind })));
      f.inc();
    },
    failedOver({ engine, op }) {
      metrics.child(metrics.engineFailovers, { engine: engine.id, operation: op }).inc();
    },
  };
}
