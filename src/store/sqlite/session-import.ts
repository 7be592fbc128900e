import type Database from "better-sqlite3";

import { AlreadyExistsError } from "../../contract/errors.js";
import type { ImportedTranscript, SessionLabels, SessionRecord } from "../types.js";
import { importedEntryRow, newSessionRow, toSessionRecord } from "./rows.js";
import type { Statements } from "./statements.js";
import { checkSessionId, saveSession } from "./transcript-writes.js";
import { checkImportPlan } from "../import-plan.js";

/**
 * SqliteStore.importSession: the session row and every entry in one IMMEDIATE transaction. The
 * plan is checked before anything is written; a duplicate id still fails on the unique index and
 * rolls everything back.
 */
export function importSession(
  db: Database.Database,
  stmts: Statements,
  sessionId: string,
  labels: SessionLabels,
  t: ImportedTranscript,
): SessionRecord {
  checkSessionId(sessionId);
  checkImportPlan(t);
  const run = db.transaction((): SessionRecord => {
    if (stmts.session.get(sessionId)) throw new AlreadyExistsError(`session ${sessionId} already exists`);
    const now = Date.now();
    const row = newSessionRow(sessionId, labels, now);
    row.header_json = t.headerJson;
    stmts.insertSession.run(row);
    t.entries.forEach(({ entry, tokenCount }, i) => {
      const built = importedEntryRow({ sessionId, seq: i + 1 }, entry, tokenCount, `entry ${i} (${entry.id})`);
      stmts.insertEntry.run(built.row);
      row.entry_count += 1;
      if (built.row.kind === "message") {
        row.message_count += 1;
        row.total_tokens += tokenCount;
      } else if (built.row.kind === "compaction") row.compaction_count += 1;
    });
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
    return toSessionRecord(row);
  });
  return run.immediate();
}
