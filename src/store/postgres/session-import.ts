import type { ImportedTranscript, SessionLabels, SessionRecord } from "../types.js";
import type { PgDatabase } from "./database.js";
import { chunks, importedEntryRow, noteMessageEntry, toSessionRecord } from "./rows.js";
import { insertEntries, insertNewSession, saveSession } from "./transcript-writes.js";
import { checkSessionId } from "../write-checks.js";
import { checkImportPlan } from "../import-plan.js";

/**
 * PostgresStore.importSession: the session row and every entry in one transaction. The plan is
 * checked before anything is written; the session row is inserted first, so an import racing
 * another creator of the same id (on any replica) fails with AlreadyExistsError and writes
 * nothing. Entries go in INSERTs of bounded size; a duplicate id still fails on the unique
 * constraint and rolls everything back.
 */
export async function importSession(db: PgDatabase, sessionId: string, labels: SessionLabels, t: ImportedTranscript): Promise<SessionRecord> {
  checkSessionId(sessionId);
  checkImportPlan(t);
  return db.transaction(async (conn) => {
    const now = Date.now();
    // As in SQLite: an existing session is refused before any entry is looked at.
    const row = await insertNewSession(conn, sessionId, labels, now, t.headerJson);
    const rows = t.entries.map(({ entry, tokenCount }, i) => importedEntryRow({ sessionId, seq: i + 1 }, entry, tokenCount, `entry ${i} (${entry.id})`).row);
    for (const r of rows) {
      row.entry_count += 1;
      if (r.kind === "message") {
        row.message_count += 1;
        row.total_tokens += r.token_count;
        noteMessageEntry(row, r);
      } else if (r.kind === "compaction") row.compaction_count += 1;
    }
    for (const part of chunks(rows)) await insertEntries(conn, sessionId, part);
    row.last_seq = t.entries.length;
    row.last_entry_id = t.leafEntryId;
    if (t.compactionIndex !== null) {
      const c = t.entries[t.compactionIndex];
      row.latest_compaction_id = c.entry.id;
      row.latest_compaction_seq = t.compactionIndex + 1;
      row.active_summary_tokens = c.tokenCount;
    }
    row.active_from_seq = t.activeFromIndex + 1;
    await saveSession(conn, row, now);
    // The store's triggers counted the entries' bytes (migration 12).
    row.stored_bytes = (await conn.query<{ b: string }>("SELECT stored_bytes AS b FROM sessions WHERE session_id = $1", [sessionId])).rows[0]?.b ?? 0;
    return toSessionRecord(row);
  });
}
