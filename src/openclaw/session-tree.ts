import { isRecord, isString, type JsonObject } from "./json.js";
import { loadedEntry } from "./session-file.js";
import { runAll, type Steps } from "../contract/time-slices.js";

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
 * Not ported: OpenClaw's repair of a `firstKeptEntryId` that names an unrecognised row (it moves
 * the mark to a neighbouring entry); test/openclaw/session-conformance.test.ts checks the rest of
 * this module against the real OpenClaw.
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
  return runAll(activeBranchSteps(entries));
}

/** {@link activeBranch} as steps (one per entry read), for large files read a time slice at a time. */
export function* activeBranchSteps(entries: TreeEntry[]): Steps<ActiveBranch> {
  const nav = new Navigation();
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (e.recognized) nav.appendCanonical(e.raw, i);
    else nav.appendOpaque(e.raw);
    yield;
  }
  const path = nav.branch();
  yield;
  const boundary = findLastIndex(path, (i) => entries[i].raw.type === "reset" || entries[i].raw.type === "compaction");
  const boundaryEntry = boundary >= 0 ? entries[path[boundary]].raw : undefined;
  const keptAt = boundaryEntry ? path.findIndex((i) => entries[i].raw.id === boundaryEntry.firstKeptEntryId) : -1;
  const firstKept = keptAt >= 0 && keptAt < boundary ? keptAt : boundary;
  const isReset = boundaryEntry?.type === "reset";
  const resetKept = isReset ? resetKeptEntries(path.slice(firstKept, boundary).map((i) => entries[i].raw)) : undefined;
  yield;
  const visible: number[] = [];
  for (let at = 0; at < path.length; at++) {
    if (at % 1024 === 0) yield;
    const index = path[at];
    const retained = at < boundary;
    if (at === boundary || (retained && (at < firstKept || (resetKept && !resetKept.has(entries[index].raw))))) continue;
    const raw = entries[index].raw;
    if (raw.type === "message") {
      const excluded = isRecord(raw.message) && raw.message.excludeFromContext === true;
      if (excluded && !(retained && resetKept?.has(raw))) continue;
    } else if (raw.type === "branch_summary") {
      if (!raw.summary) continue;
    } else if (raw.type !== "custom_message") continue;
    visible.push(index);
  }
  const activeFrom = boundary < 0 ? 0 : firstKept < boundary ? firstKept : boundary + 1;
  return {
    leafId: nav.leafId,
    path,
    ...(boundaryEntry && !isReset ? { compactionIndex: path[boundary] } : {}),
    activeFromIndex: activeFrom < path.length ? path[activeFrom] : entries.length,
    visible,
  };
}

/**
 * Reset retention (`selectResetKeptEntries`): user and assistant messages, and paired tool results,
 * judged on the messages as OpenClaw loads them (loadedEntry).
 */
function resetKeptEntries(slice: JsonObject[]): Set<JsonObject> {
  const rows = slice.filter((raw) => raw.type === "message" && isRecord(raw.message));
  const messages = rows.map((raw) => loadedEntry(raw).message as JsonObject);
  const paired = pairedToolResults(messages);
  return new Set(
    rows.filter((_, i) => ["user", "assistant"].includes(messages[i].role as string) || (messages[i].role === "toolResult" && paired.has(messages[i]))),
  );
}

interface Occurrence {
  id: string;
  name: string | undefined;
  result?: JsonObject;
  source?: JsonObject;
}

/**
 * The tool results OpenClaw pairs with a call (`classifyToolUseResultPairing`, packages/agent-core
 * tool-result-pairing.ts): an assistant message with calls opens a frame that lasts until the next
 * one; a result in it claims an unclaimed call of the frame by id (trimmed; `toolUseId`, `call_id`
 * and the like count too), or — without any id — the frame's only call when the names agree; a
 * real result replaces a synthetic "missing tool result" one; a result naming a call of an earlier
 * frame pairs with it when exactly one such call is still unanswered. Duplicates and orphans are not
 * paired.
 */
function pairedToolResults(messages: JsonObject[]): Set<JsonObject> {
  const frames = messages.flatMap((m, start) => (m.role === "assistant" && toolCalls(m).length > 0 ? [start] : []));
  const records = frames.map((start, f) => {
    const calls = toolCalls(messages[start]);
    const occurrences: Occurrence[] = calls.map((c) => ({ ...c }));
    const pending = occurrences.slice();
    const synthetic = new Map<string, Occurrence[]>();
    const unclaimed: { result: JsonObject; source: JsonObject; id: string | undefined }[] = [];
    for (const source of messages.slice(start + 1, frames[f + 1] ?? messages.length)) {
      if (source.role !== "toolResult") continue;
      const result = legacyResultId(source, calls);
      const id = resultId(result);
      const at = id === undefined ? -1 : pending.findIndex((o) => o.id === id);
      if (at >= 0) {
        const [o] = pending.splice(at, 1);
        Object.assign(o, { result, source });
        if (isSyntheticResult(result)) synthetic.set(o.id, [...(synthetic.get(o.id) ?? []), o]);
      } else if (id === undefined || !occurrences.some((o) => o.id === id)) unclaimed.push({ result, source, id });
      else if (!isSyntheticResult(result)) {
        const replaced = synthetic.get(id)?.shift();
        if (replaced) Object.assign(replaced, { result, source });
      }
    }
    return { occurrences, unclaimed };
  });
  const unresolved = new Map<string, Occurrence[]>();
  for (const { occurrences, unclaimed } of records) {
    for (const o of occurrences) if (!o.result || isSyntheticResult(o.result)) unresolved.set(o.id, [...(unresolved.get(o.id) ?? []), o]);
    for (const r of unclaimed) {
      const candidates =
        r.id === undefined ? [] : (unresolved.get(r.id) ?? []).filter((o) => !o.result || (isSyntheticResult(o.result) && !isSyntheticResult(r.result)));
      if (candidates.length === 1) Object.assign(candidates[0], { result: r.result, source: r.source });
    }
  }
  return new Set(records.flatMap((r) => r.occurrences.flatMap((o) => (o.source ? [o.source] : []))));
}

const TOOL_CALL_TYPES = new Set(["toolCall", "toolUse", "functionCall"]);
const RESULT_ID_KEYS = ["toolCallId", "toolUseId", "tool_call_id", "tool_use_id", "callId", "call_id"];
const MISSING_RESULT_TEXT = "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair.";

function toolCalls(m: JsonObject): { id: string; name: string | undefined }[] {
  if (!Array.isArray(m.content)) return [];
  return m.content.flatMap((b) =>
    isRecord(b) && isString(b.type) && TOOL_CALL_TYPES.has(b.type) && isString(b.id) && b.id !== ""
      ? [{ id: b.id, name: isString(b.name) ? b.name : undefined }]
      : [],
  );
}

function resultId(m: JsonObject): string | undefined {
  for (const key of RESULT_ID_KEYS) if (isString(m[key]) && m[key].trim() !== "") return m[key].trim();
  return undefined;
}

/** A result without any id answers the frame's only call, unless the names disagree (`normalizeLegacyToolResultId`). */
function legacyResultId(m: JsonObject, calls: { id: string; name: string | undefined }[]): JsonObject {
  if (resultId(m) !== undefined || calls.length !== 1) return m;
  const [resultName, callName] = [m.toolName, calls[0].name].map((n) => (isString(n) ? n.trim() : ""));
  return resultName && callName && resultName !== callName ? m : { ...m, toolCallId: calls[0].id, isError: true };
}

function isSyntheticResult(m: JsonObject): boolean {
  if (!m.isError) return false;
  if (isRecord(m.details) && m.details.openclawSyntheticMissingToolResult === true) return true;
  return Array.isArray(m.content) && m.content.some((b) => isRecord(b) && b.type === "text" && b.text === MISSING_RESULT_TEXT);
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
    if (raw.type === "leaf") return this.appendLeafControl(raw);
    // Only a row with an id and a parentId links (`parentLinkedOpaqueEntrySchema`); others are inert.
    if (raw.type === "session" || !isString(raw.id) || raw.id === "" || !(raw.parentId === null || isString(raw.parentId))) return;
    const id = raw.id;
    const parentId = raw.parentId;
    this.opaqueParents.set(id, parentId);
    if (this.latestResetId !== undefined && parentId !== null && this.resetDescendants.has(parentId)) this.resetDescendants.add(id);
    this.appendParentId = id;
  }

  /** A `leaf` row moves the leaf when it has OpenClaw's shape (`opaqueLeafEntrySchema`); a malformed one is inert. */
  private appendLeafControl(raw: JsonObject): void {
    const ref = (v: unknown): v is string | null => v === null || isString(v);
    const { id, parentId, targetId, appendParentId } = raw;
    if (!isString(id) || id === "" || !ref(parentId) || !ref(targetId) || !(appendParentId === undefined || ref(appendParentId))) return;
    if (!(raw.appendMode === undefined || raw.appendMode === "side")) return;
    const state = this.leafControl(targetId, appendParentId);
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

  private leafControl(targetId: string | null, appendParent: string | null | undefined): { leafId: string | null; appendParentId: string | null } | undefined {
    const known = (ref: string | null) => ref === null || this.byId.has(ref) || (this.opaqueParents.has(ref) && !this.invalidLeafControls.has(ref));
    if (!known(targetId) || (appendParent !== undefined && !known(appendParent))) return undefined;
    const leafId = targetId === null || this.byId.has(targetId) ? targetId : this.canonicalParent(targetId);
    const appendParentId = appendParent === undefined ? leafId : this.opaqueAppendParent(appendParent);
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
