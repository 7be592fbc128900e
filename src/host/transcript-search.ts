import { fieldError } from "../contract/errors.js";
import { SearchOrder, SearchScope, type SearchHit } from "../contract/gen/contextd/v1/search.js";
import { Role, type TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { searchPage, type SearchCursor, type StoredHit } from "../store/search-hits.js";
import { parseQuery, queryDigest } from "../store/search-text.js";
import type { TranscriptStore } from "../store/types.js";
import { decodePageToken, encodePageToken, pageSize } from "./page-token.js";
import type { TranscriptPaging } from "./transcript-pages.js";
import { requireEnum } from "./validate.js";

// History search (SessionService.SearchTranscript, HostService.SearchTranscript) and
// SessionService.ExpandCompaction; proto/contextd/v1/search.proto is the contract. The caller has
// resolved the session against its credentials (SessionService's session step, or the host grant):
// everything here reads that session, or — AGENT scope — the sessions of its stored agent, which
// the caller was just admitted to.

/** What a search asks, in the terms both RPCs share. */
export interface SearchAsk {
  query: string;
  scope: SearchScope;
  order: SearchOrder;
  pageSize: number;
  pageToken: string;
}

/** The searched session as admitted: its id and stored agent. */
export interface SearchedSession {
  sessionId: string;
  agentId: string;
}

/**
 * One page of hits. The page token carries the last hit's position (and score, by relevance),
 * sealed for this caller, this RPC and session, and this query (as parsed), scope and order: a
 * token of one search does not page another.
 */
export async function searchTranscript(
  store: TranscriptStore,
  ask: SearchAsk,
  session: SearchedSession,
  paging: TranscriptPaging,
): Promise<{ hits: SearchHit[]; nextPageToken: string }> {
  const terms = parseQuery(ask.query);
  const scope = requireEnum(ask.scope, SearchScope, "scope");
  const order = requireEnum(ask.order, SearchOrder, "order") === SearchOrder.SEARCH_ORDER_RELEVANCE ? "relevance" : "newest";
  const agentWide = scope === SearchScope.SEARCH_SCOPE_AGENT;
  const limit = pageSize(ask.pageSize, 20, 100);
  const purpose = [paging.rpc, session.sessionId, agentWide ? "agent" : "session", order, queryDigest(terms)].join("\u0000");
  const position = decodePageToken(paging.key, purpose, ask.pageToken);
  const after = position === undefined ? undefined : parseCursor(position);
  const page = await searchPage(store, { sessionId: session.sessionId, agentId: agentWide ? session.agentId : undefined, terms }, order, limit, after);
  return {
    hits: page.hits.map(toSearchHit),
    nextPageToken: page.next ? encodePageToken(paging.key, purpose, JSON.stringify(page.next)) : "",
  };
}

function parseCursor(position: string): SearchCursor {
  const refused = () => fieldError("page_token", "is not a token this server issued");
  let c: unknown;
  try {
    c = JSON.parse(position);
  } catch {
    throw refused();
  }
  const o = c as Partial<SearchCursor> | null;
  if (
    !o ||
    typeof o !== "object" ||
    !Number.isSafeInteger(o.createdAtMs) ||
    typeof o.sessionId !== "string" ||
    !Number.isSafeInteger(o.seq) ||
    (o.score !== undefined && typeof o.score !== "number")
  ) {
    throw refused();
  }
  return { createdAtMs: o.createdAtMs!, sessionId: o.sessionId, seq: o.seq!, score: o.score };
}

function toSearchHit(h: StoredHit): SearchHit {
  return {
    entryId: h.entryId,
    sessionId: h.sessionId,
    seq: h.seq,
    role: h.role,
    compaction: h.compaction,
    timestampMs: h.timestampMs,
    hidden: h.hidden,
    snippet: h.snippet,
    score: h.score,
  };
}

/**
 * SessionService.ExpandCompaction: the message entries the compaction's summary covers (search.proto,
 * ExpandCompactionResponse), read in windows of the page size from the first covered seq; the page
 * token carries the last seq read, sealed for this caller, RPC, session and compaction.
 */
export async function expandCompaction(
  store: TranscriptStore,
  req: { compactionEntryId: string; pageSize: number; pageToken: string },
  sessionId: string,
  paging: TranscriptPaging,
): Promise<{ entries: TranscriptEntry[]; nextPageToken: string; previousCompactionEntryId: string }> {
  if (!req.compactionEntryId) throw fieldError("compaction_entry_id", "is required: the id of a compaction entry of the session");
  const entry = await store.readEntryById(sessionId, req.compactionEntryId);
  if (entry?.entry?.$case !== "compaction") throw fieldError("compaction_entry_id", "is not a compaction entry of the session");
  const keptSeq = async (c: TranscriptEntry, fallback: number) => {
    const firstKept = c.entry?.$case === "compaction" ? c.entry.value.firstKeptEntryId : "";
    return firstKept ? ((await store.readEntryById(sessionId, firstKept))?.seq ?? fallback) : fallback;
  };
  const to = await keptSeq(entry, entry.seq);
  const previous = await store.readPreviousCompaction(sessionId, entry.seq);
  const from = previous ? await keptSeq(previous, previous.seq + 1) : 1;
  const limit = pageSize(req.pageSize, 500, 5000);
  const purpose = [paging.rpc, sessionId, entry.id].join("\u0000");
  const position = decodePageToken(paging.key, purpose, req.pageToken);
  const afterSeq = position === undefined ? from - 1 : Number(position);
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) throw fieldError("page_token", "is not a token this server issued");
  const window = afterSeq + 1 < to ? await store.readEntries(sessionId, afterSeq, limit) : [];
  const inRange = window.filter((e) => e.seq < to);
  const entries = inRange.filter((e) => e.entry?.$case === "message" && !e.hidden && e.entry.value.role !== Role.ROLE_SYSTEM);
  const last = inRange[inRange.length - 1];
  const more = window.length === limit && last !== undefined && last.seq < to - 1;
  return {
    entries,
    nextPageToken: more ? encodePageToken(paging.key, purpose, String(last.seq)) : "",
    previousCompactionEntryId: previous?.id ?? "",
  };
}
