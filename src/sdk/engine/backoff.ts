/**
 * The delay before registration retry `attempt` (counted from 0): doubles from `initialMs` up to
 * `maxMs`, with "equal jitter" (between half and all of the exponential step) so that engines
 * waiting for the same registry do not all retry at the same moment.
 */
export function backoffDelay(attempt: number, retry: { initialMs: number; maxMs: number }): number {
  const { initialMs, maxMs } = retry;
  const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(base / 2 + Math.random() * (base / 2));
}
