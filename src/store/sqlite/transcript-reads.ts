import { NotFoundError, SessionNotFoundError } from "../../contract/errors.js";
import { Role, type TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import { readWindow } from "../paging.js";
import type { ActiveTotals, EntryRevision } from "../types.js";
import { toEntryRevision } from "../rewrite-rows.js";
import { decodeEntry, toSessionRecord } from "../rows.js";
import type { Statements } from "./statements.js";

// The transcript reads of SqliteStore that go beyond one statement (the class documents their
// behaviour). The caller runs each in one deferred transaction: an empty result and the check of
// whether the session exists then see the same snapshot.

export function readEntries(stmts: Statements, sessionId: string, afterSeq: number, limit: number): TranscriptEntry[] {
  const { after, n } = readWindow(afterSeq, limit);
  const rows = stmts.entriesAfter.all(sessionId, after, n);
  if (rows.length === 0 && !stmts.session.get(sessionId)) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
  return rows.map((r) => decodeEntry(r.payload));
}

/** The active view's tokens by role (the summary's apart), without decoding a message. */
export function readActiveTotals(stmts: Statements, sessionId: string): ActiveTotals | undefined {
  const row = stmts.session.get(sessionId);
  if (!row) return undefined;
  const summaryTokens = row.latest_compaction_seq > 0 ? row.active_summary_tokens : 0;
  const tokensByRole = new Map<number, number>();
  let tokens = summaryTokens;
  for (const r of stmts.activeTokensByRole.all(sessionId, row.active_from_seq)) {
    tokensByRole.set(r.role, r.tokens);
    tokens += r.tokens;
  }
  // Pinned system messages before the cut are part of the view (docs/pinned-messages.md).
  const pinned = stmts.pinnedTokens.get(sessionId, row.active_from_seq)?.tokens;
  if (pinned !== null && pinned !== undefined) {
    tokensByRole.set(Role.ROLE_SYSTEM, (tokensByRole.get(Role.ROLE_SYSTEM) ?? 0) + pinned);
    tokens += pinned;
  }
  return { session: toSessionRecord(row), summaryTokens, tokensByRole, tokens };
}

export function readEntryRevisions(stmts: Statements, sessionId: string, entryId: string): EntryRevision[] {
  const rows = stmts.revisions.all(sessionId, entryId);
  if (rows.length === 0) {
    if (!stmts.session.get(sessionId)) throw new SessionNotFoundError(sessionId, `session ${sessionId} not found`);
    if (!stmts.entryById.get(sessionId, entryId)) throw new NotFoundError(`entry ${entryId} not found in session ${sessionId}`);
  }
  return rows.map(toEntryRevision);
}
