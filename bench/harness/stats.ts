/**
 * Small statistics helpers. Percentiles use the nearest-rank method on the sorted samples (p99 of
 * 100 samples is the 99th smallest), so a reported value is always one that was measured.
 */

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Nearest-rank percentile, `p` in [0, 100]. NaN for no samples. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

/** The median (mean of the two middle values for an even count). NaN for no samples. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export interface LatencySummary {
  n: number;
  p50: number;
  p99: number;
  min: number;
  max: number;
}

export function summarize(values: readonly number[]): LatencySummary {
  const s = sorted(values);
  return {
    n: s.length,
    p50: median(s),
    p99: percentile(s, 99),
    min: s.length ? s[0] : Number.NaN,
    max: s.length ? s[s.length - 1] : Number.NaN,
  };
}

/** Rounds to `digits` decimals (for reports; NaN and Infinity pass through as null). */
export function round(value: number, digits = 2): number | null {
  if (!Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** a / b, or NaN when b is 0 or either is not finite. */
export function ratio(a: number, b: number): number {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return Number.NaN;
  return a / b;
}

/** Milliseconds since an arbitrary origin, sub-millisecond resolution. */
export function nowMs(): number {
  return performance.now();
}
