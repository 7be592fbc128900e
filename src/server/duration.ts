/**
 * Durations in the config file are strings with a unit: `500ms`, `2s`, `3m`, `1h`, or a sum of such
 * parts without spaces (`1m30s`). Fractions are allowed (`1.5s`); the result is rounded to whole
 * milliseconds. A bare number is refused on purpose: `timeout: 30` is ambiguous (seconds? ms?).
 */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

/** The largest delay `setTimeout` honours (2^31 − 1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_DURATION_MS = 2_147_483_647;

export const DURATION_HINT = "use 500ms, 2s, 3m";

/** Parses a duration string into milliseconds. Throws a RangeError with a one-line reason. */
export function parseDuration(input: string): number {
  const text = typeof input === "string" ? input.trim() : input;
  const bad = () => new RangeError(`${JSON.stringify(input)} is not a duration (${DURATION_HINT})`);
  if (typeof text !== "string" || text === "") throw bad();
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const m = PART.exec(text);
    if (!m) throw bad();
    total += Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  }
  if (!Number.isFinite(total)) throw bad();
  return Math.round(total);
}

/** Formats milliseconds the way the config file writes them (`180000` → `3m`, `1500` → `1500ms`). */
export function formatDuration(ms: number): string {
  if (ms !== 0 && ms % UNIT_MS.h === 0) return `${ms / UNIT_MS.h}h`;
  if (ms !== 0 && ms % UNIT_MS.m === 0) return `${ms / UNIT_MS.m}m`;
  if (ms !== 0 && ms % UNIT_MS.s === 0) return `${ms / UNIT_MS.s}s`;
  return `${ms}ms`;
}
