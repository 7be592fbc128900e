import type { Histogram } from "prom-client";
import type { ContextdStore } from "../../store/open-store.js";

/**
 * The store with every async operation timed into `contextd_store_operation_duration_seconds
 * {operation}` (the method name: appendMessages, readActiveView, commitCompaction, ...), so that the
 * stores stay free of metrics and a new store method is timed without a change here. The wrapper is
 * built once — an object whose prototype is the store, with a timing function per method — so a
 * call costs one extra function call, not a Proxy trap.
 */
export function instrumentStore(store: ContextdStore, histogram: Histogram<"operation">): ContextdStore {
  const wrapper = Object.create(store) as Record<string, unknown>;
  // SQLite does all its work synchronously inside the async methods (better-sqlite3): timing the
  // synchronous part is timing the operation, and costs no extra promise per call.
  const synchronous = store.kind === "sqlite";
  for (const name of methodNames(store)) {
    const original = (store as unknown as Record<string, (...args: unknown[]) => unknown>)[name];
    const timer = histogram.labels({ operation: name });
    wrapper[name] = (...args: unknown[]) => {
      const started = performance.now();
      const result = original.apply(store, args);
      if (synchronous || !(result instanceof Promise)) {
        timer.observe((performance.now() - started) / 1000);
        return result;
      }
      return result.finally(() => timer.observe((performance.now() - started) / 1000));
    };
  }
  return wrapper as unknown as ContextdStore;
}

/** Every method of the store's class chain (not Object's). */
function methodNames(store: object): string[] {
  const names = new Set<string>();
  for (let proto = Object.getPrototypeOf(store) as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== "constructor" && typeof (store as Record<string, unknown>)[name] === "function") names.add(name);
    }
  }
  return [...names];
}
