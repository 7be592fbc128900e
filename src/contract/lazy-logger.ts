import type { Logger } from "pino";

const LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal"]);
const noop = () => undefined;

/**
 * A child logger created on first use: most calls log nothing below `info`, and pino's child()
 * costs an object and bindings per call. A call at a disabled level never creates the child.
 */
export function lazyChild(parent: Logger, bindings: () => Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const get = () => (child ??= parent.child(bindings()));
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (typeof prop === "string" && LEVELS.has(prop) && !parent.isLevelEnabled(prop)) return noop;
      const target = get() as unknown as Record<PropertyKey, unknown>;
      const value = target[prop];
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
