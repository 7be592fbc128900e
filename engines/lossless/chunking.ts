/**
 * Which raw messages compaction may summarize next, and which it must leave alone.
 *
 * The raw tail (messages no leaf covers yet) splits into:
 *   [ oldest chunk | … more compactable messages … | protected fresh tail ]
 * - the *minimal tail* — the latest user message and everything after it — is never summarized:
 *   the model must see the request it is answering verbatim;
 * - the *protected fresh tail* is the newest `protect` tokens (rounded to a valid cut), at least
 *   the minimal tail; compaction shrinks `protect` when the tail alone is over its target;
 * - the *chunk* is the oldest run of about `chunkTokens` before the protected tail, ending at a
 *   valid cut (tool-pairs.ts), so one leaf summary never splits a tool call from its result.
 *
 * Pure functions over arrays of {role, tokenCount, tool ids}; indexes are positions in that array.
 */
import { Role } from "contextd/engine-sdk";
import { validStarts, type PairFields } from "./tool-pairs.js";

export interface ChunkingMessage extends PairFields {
  tokenCount: number;
}

/** suffix[i] = tokens of messages[i..n-1]; suffix[n] = 0. */
export function suffixTokens(messages: readonly ChunkingMessage[]): number[] {
  const suffix = new Array<number>(messages.length + 1).fill(0);
  for (let i = messages.length - 1; i >= 0; i--) suffix[i] = suffix[i + 1] + messages[i].tokenCount;
  return suffix;
}

/** The largest valid start ≤ i, or 0 when there is none. */
function validAtOrBefore(starts: readonly boolean[], i: number): number {
  for (let k = i; k > 0; k--) if (starts[k]) return k;
  return 0;
}

/**
 * Start of the minimal tail: the latest user message (or the valid cut just before it, should a
 * tool pair straddle it). Without any user message: the last valid cut before the end.
 */
export function minimalTailStart(messages: readonly ChunkingMessage[], starts = validStarts(messages)): number {
  const n = messages.length;
  if (n === 0) return 0;
  let user = -1;
  for (let i = n - 1; i >= 0; i--) {
    if (messages[i].role === Role.ROLE_USER) {
      user = i;
      break;
    }
  }
  return validAtOrBefore(starts, user >= 0 ? user : n - 1);
}

/**
 * Start of the protected fresh tail: the newest messages worth at most `protect` tokens, begun at
 * a valid cut — and never later than the minimal tail (which may make it larger than `protect`).
 */
export function protectedTailStart(messages: readonly ChunkingMessage[], protect: number, starts = validStarts(messages)): number {
  const n = messages.length;
  const suffix = suffixTokens(messages);
  let first = n;
  while (first > 0 && suffix[first - 1] <= protect) first--;
  let cut = first;
  while (cut < n && !starts[cut]) cut++;
  return Math.min(cut, minimalTailStart(messages, starts));
}

/**
 * End (exclusive) of the next leaf chunk, taken from the start of `messages` and not past `limit`:
 * the longest run ending at a valid cut that stays within `chunkTokens`, or — when the first
 * tool exchange alone is bigger — the shortest run ending at a valid cut. 0 when nothing before
 * `limit` can be cut off.
 */
export function chunkEnd(messages: readonly ChunkingMessage[], limit: number, chunkTokens: number, starts = validStarts(messages)): number {
  const last = Math.min(limit, messages.length);
  let best = 0;
  let firstValid = 0;
  let prefix = 0;
  for (let c = 1; c <= last; c++) {
    prefix += messages[c - 1].tokenCount;
    if (!starts[c]) continue;
    if (firstValid === 0) firstValid = c;
    if (prefix <= chunkTokens) best = c;
    else break;
  }
  return best > 0 ? best : firstValid;
}
