import type { IdempotencyKey, IdempotentAppend, KeyedAppend, NewMessage, SessionLabels } from "../types.js";
import type { Statements } from "./statements.js";
import { appendInTransaction, heldMessageKeys } from "./transcript-writes.js";
import { keyedAnswer, replayOf } from "../idempotency-replay.js";

/**
 * The body of SqliteStore.appendIdempotent that the group commit runs inside its transaction
 * (group-commit.ts), so keyed appends — every append of the OpenClaw plugin — share a group and its
 * WAL sync with the other appends. The key is looked up
 * and recorded inside that transaction, so two requests with one key cannot both write (the
 * connection serializes the group's jobs; a later one in the same group sees the key the earlier one
 * recorded), and a key is recorded exactly when its append is. A replay is answered, like a write,
 * after its group's sync: never before the original's rows are on disk.
 */
/** The body of appendIdempotent, for a caller that holds the (IMMEDIATE) transaction. */
export function appendIdempotentInTransaction(
  stmts: Statements,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  key: IdempotencyKey,
  maxEntries = Number.POSITIVE_INFINITY,
): IdempotentAppend {
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
}

/**
 * The body of appendKeyed (SqliteStore runs it in the group commit, like appendIdempotent): the
 * idempotency key first (a replay holds and writes nothing), then the message keys the session
 * holds, then the append of the others and the record of the idempotency key — one transaction.
 */
export function appendKeyedInTransaction(
  stmts: Statements,
  sessionId: string,
  messages: NewMessage[],
  create: SessionLabels,
  key: IdempotencyKey | undefined,
  maxEntries = Number.POSITIVE_INFINITY,
): KeyedAppend {
  if (key) {
    const seen = stmts.idempotencyKey.get(sessionId, key.key);
    if (seen) return replayOf(seen, key, sessionId);
  }
  const held = stmts.session.get(sessionId) ? heldMessageKeys(stmts, sessionId, messages) : new Map<number, { id: string; tokenCount: number }>();
  const fresh = messages.filter((_, i) => !held.has(i));
  const entries = fresh.length > 0 || held.size === 0 ? appendInTransaction(stmts, sessionId, fresh, create, maxEntries) : [];
  const answer = keyedAnswer(messages, entries, held);
  if (key) {
    stmts.insertIdempotencyKey.run({
      session_id: sessionId,
      idempotency_key: key.key,
      request_hash: key.requestHash,
      entry_ids: JSON.stringify(answer.entryIds),
      token_counts: JSON.stringify(answer.tokenCounts),
      created_at_ms: Date.now(),
    });
  }
  return answer;
}
