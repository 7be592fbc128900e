import { InvalidArgumentError } from "../contract/errors.js";
import { quote } from "../contract/quote.js";
import { toSessionRecord, type SessionRow } from "./rows.js";
import type { SessionRecord } from "./types.js";

// How both stores page listSessions and readEntries (TranscriptStore, types.ts): the same limits,
// the same cursor, so a client paging through one store pages identically through the other.

const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1_000;
const DEFAULT_READ_LIMIT = 1_000;

/** A listSessions page size: a non-positive or non-integer limit is 100, and at most 1000. */
export function listPageSize(limit: number): number {
  return !Number.isInteger(limit) || limit <= 0 ? DEFAULT_LIST_LIMIT : Math.min(limit, MAX_LIST_LIMIT);
}

/**
 * A listSessions cursor, `<updated_at_ms>:<session_id>` of the last session of the previous page
 * (sessions are listed by most recent activity, then id). Anything else is INVALID_ARGUMENT.
 */
export function parseListCursor(cursor: string): { updatedAtMs: number; sessionId: string } {
  const at = cursor.indexOf(":");
  const updatedAtMs = Number(cursor.slice(0, at));
  if (at <= 0 || !Number.isSafeInteger(updatedAtMs)) throw new InvalidArgumentError(`invalid session list cursor ${quote(cursor)}`);
  return { updatedAtMs, sessionId: cursor.slice(at + 1) };
}

/** The page of `rows`, read with one row more than `size` to know whether another page follows. */
export function listPage(rows: SessionRow[], size: number): { sessions: SessionRecord[]; nextCursor: string } {
  const more = rows.length > size;
  const page = more ? rows.slice(0, size) : rows;
  const last = page[page.length - 1];
  return {
    sessions: page.map(toSessionRecord),
    nextCursor: more && last ? `${last.updated_at_ms}:${last.session_id}` : "",
  };
}

/** readEntries' window: entries after `afterSeq` (0 when not positive), `limit` of them (1000 when not positive). */
export function readWindow(afterSeq: number, limit: number): { after: number; n: number } {
  return {
    after: Number.isInteger(afterSeq) && afterSeq > 0 ? afterSeq : 0,
    n: Number.isInteger(limit) && limit > 0 ? limit : DEFAULT_READ_LIMIT,
  };
}
