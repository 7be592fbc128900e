import { setImmediate as nextTurn } from "node:timers/promises";
import type Database from "better-sqlite3";

import { SessionExistsError } from "../../contract/errors.js";
import type { ImportedTranscript, SessionLabels, SessionRecord } from "../types.js";
import { importedEntryRow, noteMessageEntry, toSessionRecord, type EntryRow } from "../rows.js";
import type { Statements } from "./statements.js";
import { insertEntry, insertSession, saveSession } from "./transcript-writes.js";
import { checkSessionId } from "../write-checks.js";
import { checkImportPlan } from "../import-plan.js";

/** Rows built between turns of the event loop (each is a protobuf copy and encoding). */
const ROWS_PER_SLICE = 256;

/**
 * SqliteStore.importSession: the session row and every entry in one IMMEDIATE transaction. The
 * plan is checked before anything is written; a duplicate id still fails on the unique index and
 * rolls everything back.
 *
 * The rows are built first, yielding to the event loop between slices, so that a file at
 * `limits.max_import_bytes` does not hold every other call for seconds; only the inserts run inside
 * the transaction (synchronous: better-sqlite3's connection is shared, so a transaction left open
 * across a yield would take in other sessions' writes). A TEMP staging table written in short
 * transactions would shorten the remaining block further (the import's bounds: docs/security.md,
 * "A malicious runtime").
 */
export async function importSession(
  db: Database.Database,
  stmts: Statements,
  sessionId: string,
  labels: SessionLabels,
  t: ImportedTranscript,
): Promise<SessionRecord> {
  checkSessionId(sessionId);
  checkImportPlan(t);
  const rows: EntryRow[] = [];
  for (let i = 0; i < t.entries.length; i++) {
    if (i > 0 && i % ROWS_PER_SLICE === 0) await nextTurn();
    const { entry, tokenCount } = t.entries[i];
    rows.push(importedEntryRow({ sessionId, seq: i + 1 }, entry, tokenCount, `entry ${i} (${entry.id})`).row);
  }
  const run = db.transaction((): SessionRecord => {
    if (stmts.session.get(sessionId)) throw new SessionExistsError(sessionId, `session ${sessionId} already exists`);
    const now = Date.now();
    const row = insertSession(stmts, sessionId, labels, now, t.headerJson);
    for (const entry of rows) {
      insertEntry(stmts, row, entry);
      row.entry_count += 1;
      if (entry.kind === "message") {
        row.message_count += 1;
        row.total_tokens += entry.token_count;
        noteMessageEntry(row, entry);
      } else if (entry.kind === "compaction") row.compaction_count += 1;
    }
    row.last_seq = t.entries.length;
    row.last_entry_id = t.leafEntryId;
    if (t.compactionIndex !== null) {
      const c = t.entries[t.compactionIndex];
      row.latest_compaction_id = c.entry.id;
      row.latest_compaction_seq = t.compactionIndex + 1;
      row.active_summary_tokens = c.tokenCount;
    }
    row.active_from_seq = t.activeFromIndex + 1;
    saveSession(stmts, row, now);
    // The store's triggers counted the entries' bytes (migration 12).
    row.stored_bytes = stmts.session.get(sessionId)?.stored_bytes ?? 0;
    return toSessionRecord(row);
  });
  return run.immediate();
}
