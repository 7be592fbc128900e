import type { ActiveView, ViewMessage } from "../types.js";
import { decodeEntry, toSessionRecord, toViewMessage, type PayloadRow, type SessionRow } from "./rows.js";
import type { Statements } from "./statements.js";
import type { CachedView, ViewCache } from "./view-cache.js";

/**
 * A session's active view, from the cache where it is still right (view-cache.ts says when) and
 * extended with what was appended since, else read and decoded whole. Runs inside the caller's read
 * transaction, so the row and the entries are one snapshot.
 */
export function readActiveView(stmts: Statements, cache: ViewCache, sessionId: string): ActiveView | undefined {
  cache.checkDataVersion(stmts.dataVersion.get()!.data_version);
  // No row, no cached view: deletes of this connection clear the cache, others' move data_version.
  const row = stmts.session.get(sessionId);
  if (!row) return undefined;
  const cached = cache.get(sessionId);
  let view = cached;
  if (!view || !holds(view, row)) view = readWhole(stmts, sessionId, row);
  else if (view.lastSeq < row.last_seq) view = extend(stmts, sessionId, view, row);
  if (view !== cached) cache.set(sessionId, view);
  return {
    session: toSessionRecord(row),
    ...(view.compaction ? { compaction: view.compaction } : {}),
    messages: [...view.pinned, ...view.kept],
    pinnedCount: view.pinned.length,
    tokens: view.tokens,
  };
}

/** The cached view is this session's and no compaction moved it since; appends may have followed. */
function holds(view: CachedView, row: SessionRow): boolean {
  return (
    view.createdAtMs === row.created_at_ms &&
    view.latestCompactionSeq === row.latest_compaction_seq &&
    view.activeFromSeq === row.active_from_seq &&
    view.lastSeq <= row.last_seq
  );
}

function readWhole(stmts: Statements, sessionId: string, row: SessionRow): CachedView {
  let compaction: ActiveView["compaction"];
  let tokens = 0;
  let bytes = 0;
  if (row.latest_compaction_seq > 0) {
    const c = stmts.entryBySeq.get(sessionId, row.latest_compaction_seq);
    if (!c) throw new Error(`session ${sessionId}: compaction entry seq ${row.latest_compaction_seq} is missing`);
    compaction = Object.freeze({ entry: Object.freeze(decodeEntry(c.payload)), summaryTokens: row.active_summary_tokens });
    tokens += row.active_summary_tokens;
    bytes += c.payload.length;
  }
  const pinned = decodeAll(stmts.pinnedMessages.all(sessionId, row.active_from_seq));
  const kept = decodeAll(stmts.activeMessages.all(sessionId, row.active_from_seq));
  for (const part of [pinned, kept]) {
    tokens += part.tokens;
    bytes += part.bytes;
  }
  return {
    createdAtMs: row.created_at_ms,
    latestCompactionSeq: row.latest_compaction_seq,
    activeFromSeq: row.active_from_seq,
    lastSeq: row.last_seq,
    ...(compaction ? { compaction } : {}),
    pinned: pinned.messages,
    kept: kept.messages,
    tokens,
    bytes,
  };
}

/** The cached view with the messages appended after its last seq (pinned ones cannot change without a compaction). */
function extend(stmts: Statements, sessionId: string, view: CachedView, row: SessionRow): CachedView {
  const added = decodeAll(stmts.activeMessages.all(sessionId, view.lastSeq + 1));
  return { ...view, lastSeq: row.last_seq, kept: [...view.kept, ...added.messages], tokens: view.tokens + added.tokens, bytes: view.bytes + added.bytes };
}

/** Decoded view messages, frozen: a cached one is shared by every read of the session. */
function decodeAll(rows: PayloadRow[]): { messages: ViewMessage[]; tokens: number; bytes: number } {
  let tokens = 0;
  let bytes = 0;
  const messages = rows.map((r) => {
    tokens += r.token_count;
    bytes += r.payload.length;
    const m = toViewMessage(r);
    Object.freeze(m.message);
    return Object.freeze(m);
  });
  return { messages, tokens, bytes };
}
