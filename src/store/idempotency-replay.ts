import { AlreadyExistsError, InvalidArgumentError } from "../contract/errors.js";
import type { IdempotencyKey, IdempotentAppend } from "./types.js";

/** An idempotency key row as both stores keep it. */
export interface StoredIdempotencyKey {
  request_hash: string;
  entry_ids: string;
  token_counts: string;
}

/**
 * The answer to an append whose key was seen before in this session: the first append's entry ids
 * and token counts, written again by nobody. A key reused for different messages is a client bug,
 * not a retry, and is refused ALREADY_EXISTS (it would otherwise silently drop the new messages).
 */
export function replayOf(seen: StoredIdempotencyKey, key: IdempotencyKey, sessionId: string): IdempotentAppend {
  if (seen.request_hash !== key.requestHash) {
    throw new AlreadyExistsError(
      `idempotency_key "${key.key}" was already used in session "${sessionId}" for different messages; ` +
        "a retry must send the same messages, a new request needs a new key",
    );
  }
  return { replayed: true, entryIds: JSON.parse(seen.entry_ids) as string[], tokenCounts: JSON.parse(seen.token_counts) as number[] };
}

/** Refuses a keyed append without a usable key, before any transaction (both stores). */
export function checkIdempotencyKey(key: IdempotencyKey): void {
  if (!key || typeof key.key !== "string" || key.key === "") throw new InvalidArgumentError("idempotency key is required");
}
