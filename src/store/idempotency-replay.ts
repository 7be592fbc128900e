import { IdempotencyKeyReusedError, InvalidArgumentError } from "../contract/errors.js";
import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { IdempotencyKey, IdempotentAppend, KeyedAppend, NewMessage } from "./types.js";

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
export function replayOf(seen: StoredIdempotencyKey, key: IdempotencyKey, sessionId: string): Extract<IdempotentAppend, { replayed: true }> {
  if (seen.request_hash !== key.requestHash) {
    throw new IdempotencyKeyReusedError(key.key, sessionId);
  }
  return { replayed: true, entryIds: JSON.parse(seen.entry_ids) as string[], tokenCounts: JSON.parse(seen.token_counts) as number[] };
}

/** Refuses a keyed append without a usable key, before any transaction (both stores). */
export function checkIdempotencyKey(key: IdempotencyKey): void {
  if (!key || typeof key.key !== "string" || key.key === "") throw new InvalidArgumentError("idempotency key is required");
}

/**
 * appendKeyed's answer, the same for both stores: each requested message's slot holds the entry
 * stored for it now (in order, as `entries` holds them) or the one that held its key.
 */
export function keyedAnswer(
  messages: readonly NewMessage[],
  entries: readonly TranscriptEntry[],
  held: ReadonlyMap<number, { id: string; tokenCount: number }>,
): Extract<KeyedAppend, { replayed: false }> {
  const entryIds: string[] = [];
  const tokenCounts: number[] = [];
  let next = 0;
  messages.forEach((m, i) => {
    const h = held.get(i);
    if (h) {
      entryIds.push(h.id);
      tokenCounts.push(h.tokenCount);
      return;
    }
    entryIds.push(entries[next++].id);
    tokenCounts.push(m.tokenCount);
  });
  return { replayed: false, entries: [...entries], entryIds, tokenCounts, held: [...held.keys()].sort((a, b) => a - b) };
}
