import { ConflictError, InvalidArgumentError, LimitExceededError, SessionExistsError, SessionNotFoundError } from "../../contract/errors.js";
import type { CompactionEntry, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import type { EntryRewriteInput, NewMessage, RewriteOutcome, SeedEntry, SessionLabels, SessionRecord } from "../types.js";
import { run, type Conn, type PgDatabase } from "./database.js";
import {
  bytea,
  compactionEntryRow,
  entryArrays,
  messageEntryRow,
  newEntryId,
  newSessionParams,
  newSessionRow,
  noteMessageEntry,
  sessionParams,
  toSessionRecord,
  type EntryRow,
  type RewriteTargetRow,
  type SessionRow,
} from "./rows.js";
import { checkTimeMs } from "../rows.js";
import { SQL } from "./statements.js";
import { planRewrites, rewriteTotals } from "../rewrite-plan.js";
import { seedCompaction } from "../seed-entries.js";
import { firstKeptSeq as checkFirstKept, type FirstKeptRow } from "../first-kept.js";
import { checkSessionId } from "../write-checks.js";

// The transcript write paths of PostgresStore (the class documents their behaviour; it is the
// SQLite store's). Each runs in one transaction that first locks the session row, so writers of one
// session — on any replica — take turns, and the row read under the lock cannot change until
// commit: the helpers advance it in memory, the entries of a call go in one INSERT, and saveSession
// writes the row back once, at the end.

export async function appendMessages(
  db: PgDatabase,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  maxEntries = Number.POSITIVE_INFINITY,
): Promise<TranscriptEntry[]> {
  checkSessionId(sessionId);
  if (!Array.isArray(messages)) throw new InvalidArgumentError("messages must be a list");
  return db.transaction((conn) => appendInTransaction(conn, sessionId, messages, create, maxEntries));
}

/** The body of appendMessages, for callers that already hold a transaction. */
export async function appendInTransaction(
  conn: Conn,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  maxEntries: number,
): Promise<TranscriptEntry[]> {
  const now = Date.now();
  const row = (await lockSession(conn, sessionId)) ?? (await createAndLock(conn, sessionId, create, now));
  // Checked under the row lock, so concurrent appends (from any replica) cannot overshoot the
  // limit together; a session this call created is rolled back with it.
  const after = row.entry_count + messages.length;
  if (after > maxEntries) {
    throw new LimitExceededError(`session "${sessionId}" would have ${after} entries, over limits.max_session_entries (${maxEntries})`, {
      key: "limits.max_session_entries",
      value: maxEntries,
    });
  }
  const built = messages.map((m, i) => nextMessage(row, newEntryId(), m.message, m.tokenCount, now, i, m.key));
  await insertEntries(
    conn,
    sessionId,
    built.map((b) => b.row),
  );
  await saveSession(conn, row, now);
  return built.map((b) => b.entry);
}

export async function createSession(db: PgDatabase, sessionId: string, labels: SessionLabels, seed: SeedEntry[], expiresAtMs = 0): Promise<SessionRecord> {
  checkSessionId(sessionId);
  if (!Array.isArray(seed)) throw new InvalidArgumentError("seed must be a list");
  checkTimeMs(expiresAtMs, "expiresAtMs");
  return db.transaction(async (conn) => {
    const now = Date.now();
    const row = await insertNewSession(conn, sessionId, labels, now);
    if (expiresAtMs > 0) await run(conn, SQL.setExpiry, [sessionId, expiresAtMs]);
    // Ids are assigned up front so that a seed compaction may name any seed message as its first kept entry.
    const ids = seed.map(() => newEntryId());
    const rows: EntryRow[] = [];
    seed.forEach((s, i) => {
      if (s.kind === "message") {
        rows.push(nextMessage(row, ids[i], s.message, s.tokenCount, now, i).row);
        return;
      }
      const { entry, firstKeptId, firstKeptSeq } = seedCompaction(seed, ids, i, sessionId, row.active_from_seq);
      const compaction = { ...entry.compaction, firstKeptEntryId: firstKeptId };
      rows.push(nextCompaction(row, ids[i], compaction, entry.summaryTokens, firstKeptSeq, now, `seed entry ${i}`).row);
    });
    await insertEntries(conn, sessionId, rows);
    await saveSession(conn, row, now);
    // The store's triggers counted the entries' bytes (migration 12).
    row.stored_bytes = (await conn.query<{ b: string }>("SELECT stored_bytes AS b FROM sessions WHERE session_id = $1", [sessionId])).rows[0]?.b ?? 0;
    return toSessionRecord(row);
  });
}

export async function commitCompaction(
  db: PgDatabase,
  sessionId: string,
  compaction: CompactionEntry,
  expectedLatestCompactionId: string,
  summaryTokens: number,
  compactedThroughSeq?: number,
): Promise<TranscriptEntry> {
  return db.transaction(async (conn) => {
    const row = await lockSession(conn, sessionId);
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
      const [kept] = await run<FirstKeptRow>(conn, SQL.entryById, [sessionId, firstKeptId]);
      firstKeptSeq = checkFirstKept(sessionId, firstKeptId, kept, row.active_from_seq);
    } else if (compactedThroughSeq !== undefined) {
      // Nothing kept from the compacted view; what was appended after the caller read it stays active.
      firstKeptSeq = Math.max(row.active_from_seq, compactedThroughSeq + 1);
    }
    const now = Date.now();
    const built = nextCompaction(row, newEntryId(), compaction, summaryTokens, firstKeptSeq, now, "compaction");
    await insertEntries(conn, sessionId, [built.row]);
    await saveSession(conn, row, now);
    return built.entry;
  });
}

export async function rewriteEntries(db: PgDatabase, sessionId: string, rewrites: EntryRewriteInput[], reason: string): Promise<RewriteOutcome> {
  checkSessionId(sessionId);
  if (!Array.isArray(rewrites)) throw new InvalidArgumentError("rewrites must be a list");
  const why = typeof reason === "string" ? reason : "";
  return db.transaction(async (conn) => {
    const row = await lockSession(conn, sessionId);
    if (!row) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    // Every target in one read, then each rewrite is resolved and encoded (in request order, with
    // the SQLite store's checks and messages) before anything is written.
    const ids = rewrites.map((r) => r?.entryId).filter((id): id is string => typeof id === "string" && id !== "");
    const targets = new Map<string, RewriteTargetRow>();
    if (ids.length > 0) {
      for (const t of await run<RewriteTargetRow & { id: string }>(conn, SQL.rewriteTargets, [sessionId, ids])) targets.set(t.id, t);
    }
    const planned = planRewrites(sessionId, rewrites, (id) => targets.get(id));
    if (planned.length === 0) return { rewrittenEntries: 0, bytesFreed: 0 };
    const now = Date.now();
    for (const p of planned) {
      await run(conn, SQL.insertRevision, [sessionId, p.id, p.previous.revision ?? 0, p.target.token_count, now, why, p.target.payload]);
      await run(conn, SQL.updateEntry, [sessionId, p.next.row.seq, p.next.row.role, p.next.row.token_count, bytea(p.next.row.payload), p.next.row.index_text]);
    }
    const { tokenDelta, bytesFreed } = rewriteTotals(planned);
    row.total_tokens += tokenDelta;
    await saveSession(conn, row, now);
    return { rewrittenEntries: planned.length, bytesFreed };
  });
}

// --- inside transactions -------------------------------------------------------------------

export async function lockSession(conn: Conn, sessionId: string): Promise<SessionRow | undefined> {
  return (await run<SessionRow>(conn, SQL.lockSession, [sessionId]))[0];
}

/**
 * Creates the session when it does not exist and locks its row. Of two transactions creating one
 * session at once, the second's INSERT waits for the first to commit and then does nothing, and
 * the lock hands it the row the first wrote: no error, no lost entries. A session deleted between
 * the INSERT that found it and the lock is simply created again.
 */
async function createAndLock(conn: Conn, sessionId: string, labels: SessionLabels, now: number): Promise<SessionRow> {
  for (let attempt = 1; ; attempt++) {
    await run(conn, SQL.insertSession, newSessionParams(newSessionRow(sessionId, labels, now)));
    const row = await lockSession(conn, sessionId);
    if (row) return row;
    if (attempt >= 3) throw new Error(`session ${sessionId} was deleted ${attempt} times between its INSERT and its lock`);
  }
}

/** Inserts the row of a session that must not exist yet; AlreadyExistsError when it does. */
export async function insertNewSession(conn: Conn, sessionId: string, labels: SessionLabels, now: number, headerJson = ""): Promise<SessionRow> {
  const row = newSessionRow(sessionId, labels, now);
  row.header_json = headerJson;
  const inserted = await run(conn, SQL.insertSession, newSessionParams(row));
  if (inserted.length === 0) throw new SessionExistsError(sessionId, `session ${sessionId} already exists`);
  return row;
}

export async function insertEntries(conn: Conn, sessionId: string, rows: readonly EntryRow[]): Promise<void> {
  if (rows.length > 0) await run(conn, SQL.insertEntries, [sessionId, ...entryArrays(rows)]);
}

/** Builds the next message entry after the session's last entry and advances `row` (in memory). */
function nextMessage(row: SessionRow, id: string, message: NewMessage["message"], tokenCount: number, now: number, index: number, messageKey?: string) {
  const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
  const built = messageEntryRow(pos, id, message, tokenCount, now, `message ${index}`, messageKey);
  row.last_seq = pos.seq;
  row.last_entry_id = id;
  row.entry_count += 1;
  row.message_count += 1;
  row.total_tokens += tokenCount;
  noteMessageEntry(row, built.row);
  return built;
}

/** Builds a compaction entry and moves the active view of `row` (in memory). */
function nextCompaction(
  row: SessionRow,
  id: string,
  compaction: CompactionEntry,
  summaryTokens: number,
  firstKeptSeq: number | null,
  now: number,
  what: string,
) {
  const pos = { sessionId: row.session_id, seq: row.last_seq + 1, parentId: row.last_entry_id };
  const built = compactionEntryRow(pos, id, compaction, summaryTokens, now, what);
  row.last_seq = pos.seq;
  row.last_entry_id = id;
  row.entry_count += 1;
  row.compaction_count += 1;
  row.latest_compaction_id = id;
  row.latest_compaction_seq = pos.seq;
  row.active_from_seq = firstKeptSeq ?? pos.seq + 1;
  row.active_summary_tokens = summaryTokens;
  return built;
}

export async function saveSession(conn: Conn, row: SessionRow, now: number): Promise<void> {
  row.updated_at_ms = Math.max(row.updated_at_ms, now);
  await run(conn, SQL.saveSession, sessionParams(row));
}
