import { InvalidArgumentError } from "../../contract/errors.js";
import type { IdempotencyKey, IdempotentAppend, NewMessage, SessionLabels } from "../types.js";
import { run, type PgDatabase } from "./database.js";
import { isUniqueViolation } from "./errors.js";
import type { IdempotencyRow } from "./rows.js";
import { SQL } from "./statements.js";
import { appendInTransaction, checkSessionId, lockSession } from "./transcript-writes.js";
import { checkIdempotencyKey, replayOf } from "../idempotency-replay.js";

/**
 * PostgresStore.appendIdempotent: the key is looked up and recorded in the transaction of the
 * append, after the session row is locked. Two requests with one key — on two replicas — take
 * turns on that lock, and the second one's lookup (a new statement, so a new snapshot) sees the key
 * the first committed and answers replayed. Should they still both reach the INSERT of the key (the
 * session did not exist yet and both created it), the primary key refuses the second, whose
 * transaction is rolled back and run again: it then finds the key. A key is recorded exactly when
 * its append is.
 */
export async function appendIdempotent(
  db: PgDatabase,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  key: IdempotencyKey,
  maxEntries = Number.POSITIVE_INFINITY,
): Promise<IdempotentAppend> {
  checkSessionId(sessionId);
  checkIdempotencyKey(key);
  if (!Array.isArray(messages)) throw new InvalidArgumentError("messages must be a list");
  return db.transaction(
    async (conn): Promise<IdempotentAppend> => {
      // A replay writes nothing: look for the key before creating anything. A key can only exist
      // in an existing session, so lock the row (when there is one) before reading the key.
      if (await lockSession(conn, sessionId)) {
        const [seen] = await run<IdempotencyRow>(conn, SQL.idempotencyKey, [sessionId, key.key]);
        if (seen) return replayOf(seen, key, sessionId);
      }
      const entries = await appendInTransaction(conn, sessionId, messages, create, maxEntries);
      await run(conn, SQL.insertIdempotencyKey, [
        sessionId,
        key.key,
        key.requestHash,
        JSON.stringify(entries.map((e) => e.id)),
        JSON.stringify(messages.map((m) => m.tokenCount)),
        Date.now(),
      ]);
      return { replayed: false, entries };
    },
    { retryOn: (err) => isUniqueViolation(err, "idempotency_keys_pkey") },
  );
}
