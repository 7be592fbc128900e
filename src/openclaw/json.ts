/** JSON values as OpenClaw writes them (JSON.stringify: `undefined` members are dropped). */
export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export function isRecord(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `String(v)` — how OpenClaw's template literals and `z.coerce.string()` turn a field into text — or
 * undefined where String() throws: a JSON object whose `toString` or `valueOf` is a plain value
 * (`{"toString": false}`), which any transcript line may hold.
 */
export function tryString(v: unknown): string | undefined {
  try {
    return String(v);
  } catch {
    return undefined;
  }
}

/**
 * Deep equality of JSON values, ignoring key order and members whose value is `undefined` (which
 * JSON.stringify drops). Numbers compare with Object.is, except that 0 equals -0 (JSON has no -0).
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") return Number.isNaN(a) && Number.isNaN(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (!isRecord(a) || !isRecord(b)) return false;
  const ka = definedKeys(a);
  const kb = definedKeys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
}

export function definedKeys(o: object): string[] {
  return Object.keys(o).filter((k) => (o as Record<string, unknown>)[k] !== undefined);
}

/** The value as JSON text, or "" for `undefined` (an absent field). */
export function toJsonText(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value);
}

/** The inverse of toJsonText: `undefined` for "". Throws on invalid JSON (it was written by us). */
export function fromJsonText(text: string): Json | undefined {
  return text === "" ? undefined : (JSON.parse(text) as Json);
}

export const isString = (v: unknown): v is string => typeof v === "string";
export const isBoolean = (v: unknown): v is boolean => typeof v === "boolean";
export const isFiniteNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
/** What a proto uint32/uint64 field holds exactly. */
export const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
/** What a proto int64 milliseconds field holds exactly. */
export const isMillis = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v);
