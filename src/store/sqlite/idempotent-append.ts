import type Database from "better-sqlite3";

import { InvalidArgumentError } from "../../contract/errors.js";
import type { IdempotencyKey, IdempotentAppend, NewMessage, SessionLabels } from "../types.js";
import type { Statements } from "./statements.js";
import { appendInTransaction, checkSessionId } from "./transcript-writes.js";
import { replayOf } from "../idempotency-replay.js";

/**
 * SqliteStore.appendIdempotent: the key is looked up and recorded inside the IMMEDIATE transaction
 * of the append, so two concurrent requests with one key cannot both write (SQLite serializes
 * writers), and a key is recorded exactly when its append is.
 */
export function appendIdempotent(
  db: Database.Database,
  stmts: Statements,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  key: IdempotencyKey,
  maxEntries = Number.POSITIVE_INFINITY,
): IdempotentAppend {
  checkSessionId(sessionId);
  if (!key || typeof key.key !== "string" || key.key === "") throw new InvalidArgumentError("idempotency key is required");
  const run = db.transaction((): IdempotentAppend => {
    const seen = stmts.idempotencyKey.get(sessionId, key.key);
    if (seen) return replayOf(seen, key, sessionId);
    const entries = appendInTransaction(stmts, sessionId, messages, create, maxEntries);
    stmts.insertIdempotencyKey.run({
      session_id: sessionId,
      idempotency_key: key.key,
      request_hash: key.requestHash,
      entry_ids: JSON.stringify(entries.map((e) => e.id)),
      token_counts: JSON.stringify(messages.map((m) => m.tokenCount)),
      created_at_ms: Date.now(),
    });
    return { replayed: false, entries };
  });
  return run.immediate();
}
