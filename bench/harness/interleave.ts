/**
 * Interleaving: the variants of a comparison run in alternating batches in the same run
 * (round 1: A, B, C; round 2: B, C, A; ...), so that a noisy neighbour, a CPU frequency change or a
 * warming cache hits every variant alike instead of whichever happened to run last. The order is
 * rotated each round so no variant always runs right after the same other one.
 */
import { nowMs } from "./stats.js";

export interface Variant<R> {
  name: string;
  /** One batch of this variant: returns what the batch measured (samples, a rate...). */
  batch: () => Promise<R>;
}

export interface InterleaveOptions {
  rounds: number;
  /** Rounds run first and thrown away (JIT warm-up, connection set-up). Default 1. */
  warmupRounds?: number;
  /** Called after every batch (for progress displays). */
  onBatch?: (done: number, total: number) => void;
}

/** Runs the variants' batches interleaved; returns each variant's measured batches, in order. */
export async function interleave<R>(variants: Array<Variant<R>>, opts: InterleaveOptions): Promise<Record<string, R[]>> {
  const warmup = opts.warmupRounds ?? 1;
  const total = (warmup + opts.rounds) * variants.length;
  const out: Record<string, R[]> = Object.fromEntries(variants.map((v) => [v.name, [] as R[]]));
  let done = 0;
  for (let round = 0; round < warmup + opts.rounds; round++) {
    for (let i = 0; i < variants.length; i++) {
      const v = variants[(i + round) % variants.length];
      const result = await v.batch();
      if (round >= warmup) out[v.name].push(result);
      opts.onBatch?.(++done, total);
    }
  }
  return out;
}

export interface LoadResult {
  /** Calls that completed successfully. */
  ok: number;
  errors: number;
  /** The first few error messages. */
  errorSamples: string[];
  /** Latency of every successful call, ms. */
  latencies: number[];
  elapsedMs: number;
  /** Successful calls per second over the window. */
  rps: number;
}

/**
 * Closed-loop load: `concurrency` workers each call `fn` back to back until `durationMs` has
 * passed (calls in flight then are awaited and counted) or `calls` calls were started.
 */
export async function closedLoop(fn: () => Promise<unknown>, concurrency: number, limit: { durationMs?: number; calls?: number }): Promise<LoadResult> {
  const latencies: number[] = [];
  const errorSamples: string[] = [];
  let errors = 0;
  let started = 0;
  const t0 = nowMs();
  const end = limit.durationMs !== undefined ? t0 + limit.durationMs : Number.POSITIVE_INFINITY;
  const maxCalls = limit.calls ?? Number.POSITIVE_INFINITY;
  const worker = async () => {
    while (started < maxCalls && nowMs() < end) {
      started++;
      const s = nowMs();
      try {
        await fn();
        latencies.push(nowMs() - s);
      } catch (err) {
        errors++;
        if (errorSamples.length < 3) errorSamples.push(err instanceof Error ? err.message : String(err));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = nowMs() - t0;
  return { ok: latencies.length, errors, errorSamples, latencies, elapsedMs, rps: (latencies.length * 1000) / elapsedMs };
}

export interface PacedCall {
  /** When the call was due (ms since the run started). */
  dueMs: number;
  /** When it was actually sent. */
  sentMs: number;
  /** Latency measured from when it was due (includes any delay in sending it). */
  latencyMs: number;
  ok: boolean;
  error?: string;
  value?: unknown;
}

/**
 * Open-loop load at a fixed rate: a call is due every 1000/rate ms whether or not earlier ones have
 * answered, and its latency is measured from when it was due, so a stall shows up in the latency of
 * every call it delayed (no coordinated omission).
 */
export async function openLoop(
  fn: (index: number) => Promise<unknown>,
  ratePerS: number,
  durationMs: number,
  onTick?: (elapsedMs: number) => void,
): Promise<PacedCall[]> {
  const interval = 1000 / ratePerS;
  const t0 = nowMs();
  const calls: Array<Promise<PacedCall>> = [];
  let index = 0;
  while (true) {
    const elapsed = nowMs() - t0;
    if (elapsed >= durationMs) break;
    // Send every call that is due by now (catch up after a timer that fired late).
    while (index * interval <= elapsed) {
      const dueMs = index * interval;
      const i = index++;
      const sentMs = nowMs() - t0;
      calls.push(
        fn(i).then(
          (value) => ({ dueMs, sentMs, latencyMs: nowMs() - t0 - dueMs, ok: true, value }),
          (err: unknown) => ({ dueMs, sentMs, latencyMs: nowMs() - t0 - dueMs, ok: false, error: err instanceof Error ? err.message : String(err) }),
        ),
      );
    }
    onTick?.(elapsed);
    const next = index * interval - (nowMs() - t0);
    await new Promise((r) => setTimeout(r, Math.max(0, next)));
  }
  return Promise.all(calls);
}
