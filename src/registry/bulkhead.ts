/**
 * A per-engine concurrency limit (bulkhead): at most `limit(engineId)` calls to one sidecar are in
 * flight at a time. Without it, a slow engine collects calls until their deadlines — each holding
 * a request, its view and a host token — and sessions routed to healthy engines queue behind them
 * for memory and event-loop time. A call over the limit is not queued: the router answers it at
 * once from `legacy` (or RESOURCE_EXHAUSTED with `on_failure: strict`), because waiting for a
 * permit would only spend the runtime's deadline on the engine that is already too slow.
 */
export class Bulkhead {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly limit: (engineId: string) => number) {}

  /** A release function when the call may proceed, undefined when the engine is at its limit. */
  tryAcquire(engineId: string): (() => void) | undefined {
    const n = this.inFlight.get(engineId) ?? 0;
    if (n >= this.limit(engineId)) return undefined;
    this.inFlight.set(engineId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(engineId) ?? 1) - 1;
      if (left > 0) this.inFlight.set(engineId, left);
      else this.inFlight.delete(engineId);
    };
  }

  /** Calls to `engineId` in flight now. */
  active(engineId: string): number {
    return this.inFlight.get(engineId) ?? 0;
  }

  limitOf(engineId: string): number {
    return this.limit(engineId);
  }
}
