import { InvalidArgumentError } from "../../contract/errors.js";
import type { IdempotencyKey, IdempotentAppend, KeyedAppend, NewMessage, SessionLabels } from "../types.js";
import { run, type PgDatabase } from "./database.js";
import { isUniqueViolation } from "./errors.js";
import type { IdempotencyRow } from "./rows.js";
import { SQL } from "./statements.js";
import { appendInTransaction, lockSession } from "./transcript-writes.js";
import { checkIdempotencyKey, keyedAnswer, replayOf } from "../idempotency-replay.js";
import { checkAppend, checkSessionId } from "../write-checks.js";

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

/**
 * PostgresStore.appendKeyed: as appendIdempotent, and under the same session lock the message keys
 * the session holds are read (one statement) and those messages left out. Two appends bringing one
 * message key — on two replicas — take turns on the lock, so the second finds the first's key;
 * should both create the session at once, the unique index on (session, message key) refuses the
 * second, which is run again and then finds it.
 */
export async function appendKeyed(
  db: PgDatabase,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  key: IdempotencyKey | undefined,
  maxEntries = Number.POSITIVE_INFINITY,
): Promise<KeyedAppend> {
  checkAppend(sessionId, messages);
  if (key) checkIdempotencyKey(key);
  return db.transaction(
    async (conn): Promise<KeyedAppend> => {
      const held = new Map<number, { id: string; tokenCount: number }>();
      if (await lockSession(conn, sessionId)) {
        if (key) {
          const [seen] = await run<IdempotencyRow>(conn, SQL.idempotencyKey, [sessionId, key.key]);
          if (seen) return replayOf(seen, key, sessionId);
        }
        const keys = messages.flatMap((m) => (m.key ? [m.key] : []));
        if (keys.length > 0) {
          const rows = await run<{ message_key: string; id: string; token_count: number }>(conn, SQL.entriesByMessageKey, [sessionId, keys]);
          const byKey = new Map(rows.map((r) => [r.message_key, { id: r.id, tokenCount: r.token_count }]));
          messages.forEach((m, i) => {
            const h = m.key ? byKey.get(m.key) : undefined;
            if (h) held.set(i, h);
          });
        }
      }
      const fresh = messages.filter((_, i) => !held.has(i));
      const entries = fresh.length > 0 || held.size === 0 ? await appendInTransaction(conn, sessionId, fresh, create, maxEntries) : [];
      const answer = keyedAnswer(messages, entries, held);
      if (key) {
        await run(conn, SQL.insertIdempotencyKey, [
          sessionId,
          key.key,
          key.requestHash,
          JSON.stringify(answer.entryIds),
          JSON.stringify(answer.tokenCounts),
          Date.now(),
        ]);
      }
      return answer;
    },
    { retryOn: (err) => isUniqueViolation(err, "idempotency_keys_pkey") || isUniqueViolation(err, "entries_by_message_key") },
  );
}
