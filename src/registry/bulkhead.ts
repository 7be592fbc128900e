/**
 * A per-instance concurrency limit (bulkhead): at most `limit(engineId)` calls to one sidecar
 * process are in flight at a time — each instance of an engine has its own
 * (docs/registry.md, "Instances"). Without it, a slow engine collects calls until their deadlines —
 * each holding a request, its view and a host token — and sessions routed to healthy engines queue
 * behind them for memory and event-loop time. A call over the limit is not queued: the router sends
 * it to another instance, or answers it at once from `legacy` (or RESOURCE_EXHAUSTED with
 * `on_failure: strict`), because waiting for a permit would only spend the runtime's deadline on
 * the instance that is already too slow. Its counts are also what the router balances on.
 */
export class Bulkhead {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly limit: (engineId: string) => number) {}

  /** A release function when the call may proceed, undefined when the instance is at its limit. */
  tryAcquire(engineId: string, instanceId = ""): (() => void) | undefined {
    const key = keyOf(engineId, instanceId);
    const n = this.inFlight.get(key) ?? 0;
    if (n >= this.limit(engineId)) return undefined;
    this.inFlight.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(key) ?? 1) - 1;
      if (left > 0) this.inFlight.set(key, left);
      else this.inFlight.delete(key);
    };
  }

  /** Calls to one instance in flight now. */
  active(engineId: string, instanceId = ""): number {
    return this.inFlight.get(keyOf(engineId, instanceId)) ?? 0;
  }

  limitOf(engineId: string): number {
    return this.limit(engineId);
  }
}

/** Engine ids hold no NUL (src/contract/engine-id.ts). */
function keyOf(engineId: string, instanceId: string): string {
  return `${engineId}\u0000${instanceId}`;
}
