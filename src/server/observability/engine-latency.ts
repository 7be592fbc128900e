import type { Histogram } from "prom-client";

/**
 * Each engine's call latency as this process's metrics hold it (`contextd_engine_call_duration_seconds`,
 * since start): per engine and operation, the calls and the p50 / p99 estimated from the histogram's
 * buckets as Prometheus' `histogram_quantile` does (linear within the bucket). The context explorer's
 * Engines view shows it; a dashboard over Prometheus is the place for its history.
 */
export interface OperationLatency {
  calls: number;
  p50Ms: number;
  p99Ms: number;
}

export type EngineLatency = Record<string, Record<string, OperationLatency>>;

export async function engineLatency(histogram: Histogram<"engine" | "operation">): Promise<EngineLatency> {
  const { values } = await histogram.get();
  // Cumulative bucket counts per engine/operation, in bucket order.
  const series = new Map<string, { engine: string; operation: string; buckets: Array<[number, number]> }>();
  for (const v of values) {
    if (v.metricName !== "contextd_engine_call_duration_seconds_bucket") continue;
    const engine = String(v.labels.engine);
    const operation = String(v.labels.operation);
    const key = `${engine}\0${operation}`;
    let s = series.get(key);
    if (!s) series.set(key, (s = { engine, operation, buckets: [] }));
    // A bucket's labels carry its upper bound `le` besides the histogram's own.
    const le = (v.labels as Record<string, string | number | undefined>).le;
    s.buckets.push([le === "+Inf" ? Infinity : Number(le), v.value]);
  }
  const out: EngineLatency = {};
  for (const { engine, operation, buckets } of series.values()) {
    buckets.sort((a, b) => a[0] - b[0]);
    const calls = buckets.at(-1)?.[1] ?? 0;
    if (calls === 0) continue;
    (out[engine] ??= {})[operation] = { calls, p50Ms: quantile(0.5, buckets) * 1000, p99Ms: quantile(0.99, buckets) * 1000 };
  }
  return out;
}

/** `histogram_quantile(q, …)` over cumulative `[upper bound, count]` buckets (the last is +Inf). */
export function quantile(q: number, buckets: Array<[number, number]>): number {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      // In the +Inf bucket: the highest finite bound is the best answer (as Prometheus).
      if (bound === Infinity) return lowerBound;
      return lowerBound + (bound - lowerBound) * ((rank - lowerCount) / Math.max(1, count - lowerCount));
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound;
}
