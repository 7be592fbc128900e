import { InvalidArgumentError } from "../contract/errors.js";
import type { SeedEntry } from "./types.js";

type SeedCompaction = Extract<SeedEntry, { kind: "compaction" }>;

/**
 * The compaction seed entry `i` of a new session, checked, with its first kept entry resolved to
 * the id and seq that seed entry will get. Both stores seed a session the same way (entry k gets
 * seq k + 1 and id `ids[k]`), so the rule for what a seeded compaction may keep lives here once:
 * it names a seed *message* that is inside the session's active view (seq ≥ `activeFromSeq`).
 */
export function seedCompaction(
  seed: readonly SeedEntry[],
  ids: readonly string[],
  i: number,
  sessionId: string,
  activeFromSeq: number,
): { entry: SeedCompaction; firstKeptId: string; firstKeptSeq: number | null } {
  const s = seed[i];
  if (s.kind !== "compaction") {
    throw new InvalidArgumentError(`seed entry ${i}: unknown kind ${String((s as { kind: unknown }).kind)}`);
  }
  const k = s.firstKeptIndex;
  if (k === null || k === undefined) return { entry: s, firstKeptId: "", firstKeptSeq: null };
  if (!Number.isInteger(k) || k < 0 || k >= seed.length || seed[k].kind !== "message" || k + 1 < activeFromSeq) {
    throw new InvalidArgumentError(`seed entry ${i}: firstKeptIndex ${String(k)} is not a seed message of session ${sessionId}'s active view`);
  }
  return { entry: s, firstKeptId: ids[k], firstKeptSeq: k + 1 };
}
