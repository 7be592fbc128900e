import { InvalidArgumentError } from "../contract/errors.js";
import type { ImportedTranscript } from "./types.js";

/**
 * Checks an import plan before either store writes any of it: entry ids present and unique, the
 * leaf one of them, the compaction index naming a compaction entry, the active-from index in range.
 * The host builds the plan from a parsed file (src/host/import-transcript.ts), so a failure here is
 * a host bug or a hand-made plan — still INVALID_ARGUMENT, never a half-imported session.
 */
export function checkImportPlan(t: ImportedTranscript): void {
  if (!t || !Array.isArray(t.entries)) throw new InvalidArgumentError("import: entries must be a list");
  const ids = new Set<string>();
  for (const { entry } of t.entries) {
    if (!entry?.id) throw new InvalidArgumentError("import: every entry needs an id");
    if (ids.has(entry.id)) throw new InvalidArgumentError(`import: entry id ${entry.id} is used twice`);
    ids.add(entry.id);
  }
  if (t.leafEntryId && !ids.has(t.leafEntryId)) throw new InvalidArgumentError(`import: leaf entry ${t.leafEntryId} is not an entry of the file`);
  const c = t.compactionIndex;
  if (c !== null && (!Number.isInteger(c) || c < 0 || c >= t.entries.length || t.entries[c].entry.entry?.$case !== "compaction")) {
    throw new InvalidArgumentError(`import: compactionIndex ${String(c)} is not a compaction entry`);
  }
  const a = t.activeFromIndex;
  if (!Number.isInteger(a) || a < 0 || a > t.entries.length) throw new InvalidArgumentError(`import: activeFromIndex ${String(a)} is out of range`);
}
