import { isFailure, type EngineCallObserver } from "./engine-call-observer.js";

/**
 * EngineStatus's counters (calls, failures, timeouts, fallbacks by reason), kept on each registered
 * engine — and calls, failures and timeouts on each instance (EngineInstance) — by observing the router: a fallback counts on the selected engine while the registry holds
 * it, quarantined or not; `legacy`'s own calls count on it.
 */
export const engineCounters: EngineCallObserver = {
  started(engine) {
    engine.counters.calls++;
    engine.instanceCounters.calls++;
  },
  ended({ engine, outcome }) {
    if (!isFailure(outcome)) return;
    engine.counters.failures++;
    engine.instanceCounters.failures++;
    if (outcome === "timeout") {
      engine.counters.timeouts++;
      engine.instanceCounters.timeouts++;
    }
  },
  fellBack({ selected, kind }) {
    if (!selected || selected.builtin) return;
    selected.counters.fallbacks++;
    selected.counters.fallbacksByReason[kind] = (selected.counters.fallbacksByReason[kind] ?? 0) + 1;
  },
};
