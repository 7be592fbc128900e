import type Database from "better-sqlite3";

import { ConflictError, InvalidArgumentError, LimitExceededError, SessionExistsError, SessionNotFoundError } from "../../contract/errors.js";
import type { CompactionEntry, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { EntryRewriteInput, NewMessage, RewriteOutcome, SeedEntry, SessionLabels, SessionRecord } from "../types.js";
import {
  checkTimeMs,
  compactionEntryRow,
  messageEntryRow,
  newEntryId,
  newSessionRow,
  noteMessageEntry,
  toSessionRecord,
  type EntryRow,
  type SessionRow,
} from "../rows.js";
import { LOG_INDEX, LOG_REINDEX } from "./search-index.js";
import type { Statements } from "./statements.js";
import { planRewrites, rewriteTotals } from "../rewrite-plan.js";
import { seedCompaction } from "../seed-entries.js";
import { firstKeptSeq as checkFirstKept } from "../first-kept.js";
import { checkSessionId } from "../write-checks.js";

// The transcript write paths of SqliteStore (the class documents their behaviour). Each runs in one
// IMMEDIATE transaction, so the session row read at its start cannot change under it: the helpers
// below advance that row in memory and saveSession writes it back once, at the end.

/** The body of appendMessages, for callers that already hold an IMMEDIATE transaction. */
export function appendInTransaction(
  stmts: Statements,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  maxEntries: number,
): TranscriptEntry[] {
  const now = Date.now();
  const existing = stmts.session.get(sessionId);
  // Checked inside the transaction, so concurrent appends cannot overshoot the limit together.
  const after = (existing?.entry_count ?? 0) + messages.length;
  if (after > maxEntries) {
    throw new LimitExceededError(`session "${sessionId}" would have ${after} entries, over limits.max_session_entries (${maxEntries})`, {
      key: "limits.max_session_entries",
      value: maxEntries,
    });
  }
  const row = existing ?? insertSession(stmts, sessionId, create, now);
  const out = messages.map((m, i) => appendMessage(stmts, row, newEntryId(), m.message, m.tokenCount, now, i, m.key));
  saveSession(stmts, row, now);
  return out;
}

/**
 * The messages of `messages` whose key the session already holds, by index, with the holding
 * entry's id and token count (appendKeyed). Read inside the append's transaction, so no other write
 * can store one of these keys between this lookup and the insert.
 */
export function heldMessageKeys(stmts: Statements, sessionId: string, messages: NewMessage[]): Map<number, { id: string; tokenCount: number }> {
  const held = new Map<number, { id: string; tokenCount: number }>();
  messages.forEach((m, i) => {
    if (!m.key) return;
    const row = stmts.entryByMessageKey.get(sessionId, m.key);
    if (row) held.set(i, { id: row.id, tokenCount: row.token_count });
  });
  return held;
}

export function createSession(
  db: Database.Database,
  stmts: Statements,
  sessionId: string,
  labels: SessionLabels,
  seed: SeedEntry[],
  expiresAtMs = 0,
): SessionRecord {
  checkSessionId(sessionId);
  if (!Array.isArray(seed)) throw new InvalidArgumentError("seed must be a list");
  checkTimeMs(expiresAtMs, "expiresAtMs");
  const run = db.transaction((): SessionRecord => {
    if (stmts.session.get(sessionId)) {
      throw new SessionExistsError(sessionId, `session ${sessionId} already exists`);
    }
    const now = Date.now();
    const row = insertSession(stmts, sessionId, labels, now);
    if (expiresAtMs > 0) stmts.setExpiry.run(expiresAtMs, sessionId);
    // Ids are assigned up front so that a seed compaction may name any seed message as its first kept entry.
    const ids = seed.map(() => newEntryId());
    seed.forEach((s, i) => {
      if (s.kind === "message") {
        appendMessage(stmts, row, ids[i], s.message, s.tokenCount, now, i);
        return;
      }
      const { entry, firstKeptId, firstKeptSeq } = seedCompaction(seed, ids, i, sessionId, row.active_from_seq);
      const compaction = { ...entry.compaction, firstKeptEntryId: firstKeptId };
      appendCompaction(stmts, row, ids[i], compaction, entry.summaryTokens, firstKeptSeq, now, `seed entry ${i}`);
    });
    saveSession(stmts, row, now);
    // The store's triggers counted the entries' bytes (migration 12).
    row.stored_bytes = stmts.session.get(sessionId)?.stored_bytes ?? 0;
    return toSessionRecord(row);
  });
  return run.immediate();
}

export function commitCompaction(
  db: Database.Database,
  stmts: Statements,
  sessionId: string,
  compaction: CompactionEntry,
  expectedLatestCompactionId: string,
  summaryTokens: number,
  compactedThroughSeq?: number,
): TranscriptEntry {
  const run = db.transaction((): TranscriptEntry => {
    const row = stmts.session.get(sessionId);
    if (!row) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    const expected = expectedLatestCompactionId ?? "";
    if (row.latest_compaction_id !== expected) {
      throw new ConflictError(
        `session ${sessionId}: compaction expected latest compaction "${expected}" but it is ` +
          `"${row.latest_compaction_id}"; another compaction committed first`,
      );
    }
    const firstKeptId = compaction.firstKeptEntryId ?? "";
    let firstKeptSeq: number | null = null;
    if (firstKeptId !== "") {
      const kept = stmts.entryById.get(sessionId, firstKeptId);
      firstKeptSeq = checkFirstKept(sessionId, firstKeptId, kept, row.active_from_seq);
    } else if (compactedThroughSeq !== undefined) {
      // Nothing kept from the compacted view; what was appended after the caller read it stays active.
      firstKeptSeq = Math.max(row.active_from_seq, compactedThroughSeq + 1);
    }
    const now = Date.now();
    const entry = appendCompaction(stmts, row, newEntryId(), compaction, summaryTokens, firstKeptSeq, now, "compaction");
    saveSession(stmts, row, now);
    return entry;
  });
  return run.immediate();
}

export function rewriteEntries(db: Database.Database, stmts: Statements, sessionId: string, rewrites: EntryRewriteInput[], reason: string): RewriteOutcome {
  checkSessionId(sessionId);
  if (!Array.isArray(rewrites)) throw new InvalidArgumentError("rewrites must be a list");
  const why = typeof reason === "string" ? reason : "";
  const run = db.transaction((): RewriteOutcome => {
    const row = stmts.session.get(sessionId);
    if (!row) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    // Resolve and encode every rewrite before writing anything.
    const planned = planRewrites(sessionId, rewrites, (id) => stmts.rewriteTarget.get(sessionId, id));
    if (planned.length === 0) return { rewrittenEntries: 0, bytesFreed: 0 };
    const now = Date.now();
    for (const p of planned) {
      stmts.insertRevision.run({
        session_id: sessionId,
        entry_id: p.id,
        revision: p.previous.revision ?? 0,
        token_count: p.target.token_count,
        replaced_at_ms: now,
        reason: why,
        payload: p.target.payload,
      });
      stmts.updateEntry.run(p.next.row);
      // The index holds the live revision only: the indexer replaces the entry's index row.
      stmts.logSearch.run(LOG_REINDEX, searchId(row), p.next.row.seq);
    }
    const { tokenDelta, bytesFreed } = rewriteTotals(planned);
    row.total_tokens += tokenDelta;
    saveSession(stmts, row, now);
    return { rewrittenEntries: planned.length, bytesFreed };
  });
  return run.immediate();
}

// --- inside transactions -------------------------------------------------------------------

export function insertSession(stmts: Statements, sessionId: string, labels: SessionLabels | undefined, now: number, headerJson = ""): SessionRow {
  const row = newSessionRow(sessionId, labels, now);
  row.header_json = headerJson;
  row.search_id = stmts.insertSession.get(row)!.search_id;
  return row;
}

/**
 * Inserts an entry of the session `row` and logs it for the search index (migration 9,
 * search-index.ts: indexed after the transaction commits), in the caller's transaction.
 */
export function insertEntry(stmts: Statements, row: SessionRow, entry: EntryRow): void {
  stmts.insertEntry.run(entry);
  if (entry.kind !== "custom") stmts.logSearch.run(LOG_INDEX, searchId(row), entry.seq);
}

/** The session's number in the search index (every session has one since migration 8). */
export function searchId(row: SessionRow): number {
  if (typeof row.search_id !== "number") throw new Error(`session ${row.session_id} has no search_id`);
  return row.search_id;
}

/** Inserts a message entry after the session's last entry and advances `row` (in memory). */
export function appendMessage(
  stmts: Statements,
  row: SessionRow,
  id: string,
  message: NewMessage["message"],
  tokenCount: number,
  now: number,
  index: number,
  messageKey?: string,
): TranscriptEntry {
  const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
  const built = messageEntryRow(pos, id, message, tokenCount, now, `message ${index}`, messageKey);
  insertEntry(stmts, row, built.row);
  row.last_seq = pos.seq;
  row.last_entry_id = id;
  row.entry_count += 1;
  row.message_count += 1;
  row.total_tokens += tokenCount;
  noteMessageEntry(row, built.row);
  return built.entry;
}

/** Inserts a compaction entry and moves the active view of `row` (in memory). */
function appendCompaction(
  stmts: Statements,
  row: SessionRow,
  id: string,
  compaction: CompactionEntry,
  summaryTokens: number,
  firstKeptSeq: number | null,
  now: number,
  what: string,
): TranscriptEntry {
  const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
  const built = compactionEntryRow(pos, id, compaction, summaryTokens, now, what);
  insertEntry(stmts, row, built.row);
  row.last_seq = pos.seq;
  row.last_entry_id = id;
  row.entry_count += 1;
  row.compaction_count += 1;
  row.latest_compaction_id = id;
  row.latest_compaction_seq = pos.seq;
  row.active_from_seq = firstKeptSeq ?? pos.seq + 1;
  row.active_summary_tokens = summaryTokens;
  return built.entry;
}

export function saveSession(stmts: Statements, row: SessionRow, now: number): void {
  row.updated_at_ms = Math.max(row.updated_at_ms, now);
  stmts.saveSession.run(row);
}
