import { isRecord, isString, type JsonObject } from "./json.js";

/**
 * Which entries of an OpenClaw session file the model sees, decided as OpenClaw 2026.9.x decides
 * it: a port of its `SessionEntryNavigation` (src/config/sessions/session-entry-navigation.ts) and
 * of `iterateSessionContextEntries` (packages/agent-core/src/harness/session/session.ts).
 *
 * - The leaf is the last recognised entry in file order that is not `appendMode: "side"`, unless a
 *   later valid `leaf` row moves it. An entry without `parentId` hangs off the leaf of its time; after
 *   a `reset`, an entry whose parent is not a descendant of the reset is re-parented to the leaf.
 * - The active branch is the path from the root to the leaf. Its latest `compaction` or `reset` is
 *   the boundary: after a compaction the model sees its summary, then the branch's entries from
 *   `firstKeptEntryId` up to the boundary, then everything after it; a reset keeps only the user and
 *   assistant messages and paired tool results from its `firstKeptEntryId` on, and no summary.
 * - Of those, `message` (unless `excludeFromContext`), `custom_message` and `branch_summary` (with a
 *   summary) entries reach the model.
 *
 * Not ported: OpenClaw's repair of a `firstKeptEntryId` that names an unrecognised row, and its
 * tool-pairing repairs beyond "a tool result pairs with an unanswered call of the latest assistant
 * message that made calls" (used for resets).
 */
export interface TreeEntry {
  raw: JsonObject;
  /** False for rows OpenClaw would keep but not recognise (e.g. `leaf` rows, unknown types). */
  recognized: boolean;
}

export interface ActiveBranch {
  /** The entry the branch ends at; null when the file leaves no active branch. */
  leafId: string | null;
  /** Indexes (into the input) of the entries on the active branch, root first. */
  path: number[];
  /** Index of the compaction whose summary heads the view (undefined after a reset or without one). */
  compactionIndex?: number;
  /** Index of the first entry of the view after its summary (entries before it are compacted away). */
  activeFromIndex: number;
  /** Indexes of the entries the model sees, in order (the summary not included). */
  visible: number[];
}

export function activeBranch(entries: TreeEntry[]): ActiveBranch {
  const nav = new Navigation();
  entries.forEach((e, i) => (e.recognized ? nav.appendCanonical(e.raw, i) : nav.appendOpaque(e.raw)));
  const path = nav.branch();
  const boundary = findLastIndex(path, (i) => entries[i].raw.type === "reset" || entries[i].raw.type === "compaction");
  const boundaryEntry = boundary >= 0 ? entries[path[boundary]].raw : undefined;
  const keptAt = boundaryEntry ? path.findIndex((i) => entries[i].raw.id === boundaryEntry.firstKeptEntryId) : -1;
  const firstKept = keptAt >= 0 && keptAt < boundary ? keptAt : boundary;
  const isReset = boundaryEntry?.type === "reset";
  const resetKept = isReset ? resetKeptEntries(path.slice(firstKept, boundary).map((i) => entries[i].raw)) : undefined;
  const visible: number[] = [];
  path.forEach((index, at) => {
    const retained = at < boundary;
    if (at === boundary || (retained && (at < firstKept || (resetKept && !resetKept.has(entries[index].raw))))) return;
    const raw = entries[index].raw;
    if (raw.type === "message") {
      const excluded = isRecord(raw.message) && raw.message.excludeFromContext === true;
      if (excluded && !(retained && resetKept?.has(raw))) return;
    } else if (raw.type === "branch_summary") {
      if (!raw.summary) return;
    } else if (raw.type !== "custom_message") return;
    visible.push(index);
  });
  const activeFrom = boundary < 0 ? 0 : firstKept < boundary ? firstKept : boundary + 1;
  return {
    leafId: nav.leafId,
    path,
    ...(boundaryEntry && !isReset ? { compactionIndex: path[boundary] } : {}),
    activeFromIndex: activeFrom < path.length ? path[activeFrom] : entries.length,
    visible,
  };
}

/** Reset retention: user and assistant messages, and tool results that answer a call of theirs. */
function resetKeptEntries(slice: JsonObject[]): Set<JsonObject> {
  const kept = new Set<JsonObject>();
  let pending = new Set<string>();
  for (const raw of slice) {
    if (raw.type !== "message" || !isRecord(raw.message)) continue;
    const m = raw.message;
    if (m.role === "assistant") {
      const calls = Array.isArray(m.content) ? m.content.filter((b) => isRecord(b) && b.type === "toolCall" && isString(b.id)) : [];
      if (calls.length > 0) pending = new Set(calls.map((b) => (b as JsonObject).id as string));
      kept.add(raw);
    } else if (m.role === "user") kept.add(raw);
    else if (m.role === "toolResult" && isString(m.toolCallId) && pending.delete(m.toolCallId)) kept.add(raw);
  }
  return kept;
}

interface Node {
  index: number;
  parentId: string | null;
}

/** The navigation state OpenClaw builds while reading a file, reduced to what the active branch needs. */
class Navigation {
  private readonly byId = new Map<string, Node>();
  private readonly opaqueParents = new Map<string, string | null>();
  private readonly logicalParents = new Map<string, string | null>();
  private readonly invalidLeafControls = new Set<string>();
  private readonly resetDescendants = new Set<string>();
  private latestResetId: string | undefined;
  leafId: string | null = null;
  private appendParentId: string | null = null;

  appendCanonical(raw: JsonObject, index: number): void {
    const id = raw.id as string;
    const hasParent = Object.hasOwn(raw, "parentId");
    const parentId = isString(raw.parentId) ? raw.parentId : null;
    const side = raw.appendMode === "side";
    if (raw.type === "label" && !this.byId.has(String(raw.targetId))) {
      this.opaqueParents.set(id, this.canonicalParent(parentId));
      return;
    }
    const resetCut = this.latestResetId !== undefined && !side && (parentId === null || !this.resetDescendants.has(parentId));
    if (resetCut || !hasParent || (!side && parentId === this.appendParentId && this.leafId !== this.appendParentId)) {
      this.logicalParents.set(id, this.leafId);
    }
    this.byId.set(id, { index, parentId });
    if (raw.type === "reset") {
      this.latestResetId = id;
      this.resetDescendants.clear();
      this.resetDescendants.add(id);
    } else {
      const logical = this.logicalParents.has(id) ? (this.logicalParents.get(id) ?? null) : parentId;
      if (this.latestResetId !== undefined && logical !== null && this.resetDescendants.has(logical)) this.resetDescendants.add(id);
    }
    this.appendParentId = id;
    if (!side) this.leafId = id;
  }

  appendOpaque(raw: JsonObject): void {
    const id = isString(raw.id) && raw.id.trim() !== "" ? raw.id : undefined;
    if (!id || !Object.hasOwn(raw, "parentId") || !(raw.parentId === null || isString(raw.parentId))) return;
    const parentId = raw.parentId as string | null;
    if (raw.type === "leaf" && (raw.targetId === null || isString(raw.targetId))) {
      const state = this.leafControl(raw.targetId as string | null, raw.appendParentId);
      if (!state) {
        this.invalidLeafControls.add(id);
        this.opaqueParents.set(id, this.opaqueAppendParent(parentId));
        return;
      }
      const outsideReset = this.latestResetId !== undefined && (state.leafId === null || !this.resetDescendants.has(state.leafId));
      const effective = outsideReset ? { leafId: this.leafId, appendParentId: this.leafId } : state;
      this.opaqueParents.set(id, effective.leafId);
      if (this.latestResetId !== undefined && effective.leafId !== null && this.resetDescendants.has(effective.leafId)) this.resetDescendants.add(id);
      this.leafId = effective.leafId;
      this.appendParentId = effective.appendParentId;
      return;
    }
    this.opaqueParents.set(id, parentId);
    if (this.latestResetId !== undefined && parentId !== null && this.resetDescendants.has(parentId)) this.resetDescendants.add(id);
    this.appendParentId = id;
  }

  /** Entry indexes from the root to the leaf. */
  branch(): number[] {
    const path: number[] = [];
    const seen = new Set<string>();
    let current = this.leafId;
    while (current && !seen.has(current)) {
      seen.add(current);
      const node = this.byId.get(current);
      if (node) {
        path.push(node.index);
        let parent = this.logicalParents.has(current) ? (this.logicalParents.get(current) ?? null) : this.canonicalParent(node.parentId);
        if (parent === current) parent = null;
        current = parent;
      } else current = this.opaqueParents.get(current) ?? null;
    }
    return path.reverse();
  }

  private leafControl(targetId: string | null, appendParent: unknown): { leafId: string | null; appendParentId: string | null } | undefined {
    const known = (ref: string | null) => ref === null || this.byId.has(ref) || (this.opaqueParents.has(ref) && !this.invalidLeafControls.has(ref));
    if (!known(targetId)) return undefined;
    if (appendParent !== undefined && !(appendParent === null || (isString(appendParent) && known(appendParent)))) return undefined;
    const leafId = targetId === null || this.byId.has(targetId) ? targetId : this.canonicalParent(targetId);
    const appendParentId = appendParent === undefined ? leafId : this.opaqueAppendParent(appendParent as string | null);
    return { leafId, appendParentId };
  }

  private opaqueAppendParent(parentId: string | null): string | null {
    if (parentId === null || this.byId.has(parentId) || this.opaqueParents.has(parentId)) return parentId;
    return this.canonicalParent(parentId);
  }

  /** The nearest recognised ancestor, skipping unrecognised rows. */
  private canonicalParent(parentId: string | null): string | null {
    const seen = new Set<string>();
    let current = parentId;
    while (current && !this.byId.has(current)) {
      if (seen.has(current)) return null;
      seen.add(current);
      current = this.opaqueParents.get(current) ?? null;
    }
    return current;
  }
}

function findLastIndex<T>(items: T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i])) return i;
  return -1;
}
