import { parse as parseYaml } from "yaml";
import { show } from "./config-values.js";

/**
 * The `@merge` form of a `CONTEXTD_*` override: `CONTEXTD_SLOTS__AGENTS='@merge {Team-A: lossless}'`.
 *
 * Why it exists: a variable's name can only spell a key in `[A-Z0-9_]`, and new keys are taken
 * lower-cased, so `CONTEXTD_SLOTS__AGENTS__TEAM_A` cannot add an agent `Team-A` (nor `a.b`). A plain
 * YAML map value can (`CONTEXTD_SLOTS__AGENTS='{Team-A: lossless}'`) but replaces the whole map,
 * dropping the file's other entries. `@merge` (the marker Dynaconf uses for the same need) puts the
 * keys in the value, spelled exactly, and merges them into what the file has: mappings key by key,
 * all the way down; anything else (a scalar, a list) replaces; `null` removes the key (its default
 * applies again). Without the marker nothing changes: a variable replaces the value at its path.
 */
export const MERGE_MARKER = "@merge";

export type MergeValue = { mapping: Record<string, unknown> } | { problem: string };

/** `undefined` when `value` is not a `@merge` value; else the mapping after the marker, or what is wrong with it. */
export function parseMergeValue(value: string): MergeValue | undefined {
  const m = /^@merge(?:\s+([\s\S]*))?$/.exec(value.trim());
  if (!m) return /^@merge\S/.test(value.trim()) ? { problem: `write "${MERGE_MARKER}" then a space, then a YAML mapping` } : undefined;
  let parsed: unknown;
  try {
    parsed = parseYaml(m[1] ?? "");
  } catch (e) {
    return { problem: `"${MERGE_MARKER}": invalid YAML: ${(e as Error).message.split("\n")[0].replace(/:$/, "")}` };
  }
  if (!isMapping(parsed))
    return {
      problem: `"${MERGE_MARKER}" needs a YAML mapping after it, e.g. ${MERGE_MARKER} {Team-A: lossless}; got ${parsed == null ? "nothing" : show(parsed)}`,
    };
  return { mapping: parsed };
}

export function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Merges `patch` into `target` in place: mappings into mappings key by key; anything else replaces.
 * `onSet` hears the key path (relative to `target`) of every value it wrote, so that a problem with
 * one of them names the variable and a problem with the file's own keys does not.
 */
export function deepMerge(target: Record<string, unknown>, patch: Record<string, unknown>, onSet: (path: string[]) => void, at: string[] = []): void {
  for (const [key, value] of Object.entries(patch)) {
    const here = [...at, key];
    const current = target[key];
    if (isMapping(value) && isMapping(current)) deepMerge(current, value, onSet, here);
    else {
      target[key] = value;
      onSet(here);
    }
  }
}
