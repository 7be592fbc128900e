import { definedKeys, isRecord, jsonEqual, type Json, type JsonObject } from "./json.js";

/**
 * The `extra_json` technique that makes the mapping lossless (proto/contextd/v1/types.proto,
 * "Lossless messages").
 *
 * A runtime object (an OpenClaw message, content block or session entry) is mapped to proto fields
 * by a forward mapping that takes each field only when the proto can hold its value exactly; the
 * reverse mapping rebuilds an object from the proto fields alone. Whatever the rebuilt object gets
 * wrong — a field the proto does not model, a value of an unexpected type, a default value the
 * rebuild leaves out — is kept verbatim in the extra object, which overrides the rebuilt object on
 * the way back. So `restore(rebuild(p), extraOf(original, rebuild(p)))` deep-equals `original` for
 * any JSON object, by construction; the mappings only decide how much of it engines can read.
 *
 * A field the rebuild sets but the original did not have is listed under ABSENT_KEY. An original
 * that has a member named ABSENT_KEY itself keeps it too: the extra then holds `{keys, value}`.
 */
export const ABSENT_KEY = "contextd.absent";

/** An extra that changes nothing: the rebuilt object is the original, as it is. */
export const EXACTLY_REBUILT = JSON.stringify({ [ABSENT_KEY]: [] });

/** The extra object that turns `rebuilt` back into `original` (undefined when none is needed). */
export function extraOf(original: JsonObject, rebuilt: JsonObject): JsonObject | undefined {
  const extra: JsonObject = {};
  let any = false;
  for (const key of definedKeys(original)) {
    if (key !== ABSENT_KEY && (!Object.hasOwn(rebuilt, key) || !jsonEqual(rebuilt[key], original[key]))) {
      extra[key] = original[key];
      any = true;
    }
  }
  const absent = definedKeys(rebuilt).filter((key) => original[key] === undefined);
  if (original[ABSENT_KEY] !== undefined) {
    extra[ABSENT_KEY] = { keys: absent, value: original[ABSENT_KEY] };
    any = true;
  } else if (absent.length > 0) {
    extra[ABSENT_KEY] = absent;
    any = true;
  }
  return any ? extra : undefined;
}

/** `rebuilt` with `extra` applied (the inverse of extraOf). */
export function restore(rebuilt: JsonObject, extra: JsonObject | undefined): JsonObject {
  if (!extra) return rebuilt;
  const out: JsonObject = { ...rebuilt };
  const marker = extra[ABSENT_KEY];
  const absent = Array.isArray(marker) ? marker : isRecord(marker) && Array.isArray(marker.keys) ? marker.keys : [];
  for (const key of absent) if (typeof key === "string") delete out[key];
  for (const [key, value] of Object.entries(extra)) if (key !== ABSENT_KEY) out[key] = value;
  if (isRecord(marker) && Object.hasOwn(marker, "value")) out[ABSENT_KEY] = marker.value;
  return out;
}

/** extraOf as the text of a proto `extra_json` field ("" when nothing is needed). */
export function extraJsonOf(original: JsonObject, rebuilt: JsonObject): string {
  const extra = extraOf(original, rebuilt);
  return extra ? JSON.stringify(extra) : "";
}

/** Parses a proto `extra_json` field; a value that is not a JSON object is ignored (engines may send anything). */
export function parseExtra(extraJson: string): JsonObject | undefined {
  if (!extraJson) return undefined;
  try {
    const value = JSON.parse(extraJson) as Json;
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Drops `undefined` members, so that an object equals its JSON form (JSON.stringify drops them too). */
export function compact(o: Record<string, Json | undefined>): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}
