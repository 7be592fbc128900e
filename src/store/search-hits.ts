import { setImmediate as nextTurn } from "node:timers/promises";

import { Role } from "../contract/gen/contextd/v1/types.js";
import { decodeEntry } from "./rows.js";
import { entrySearchText, RELEVANCE_CANDIDATES, snippetAndScore, type SearchTerms } from "./search-text.js";
import type { SearchPosition, StoreSearch, TranscriptStore } from "./types.js";

// A page of a history search over either store (search.proto): the store finds the matching entries
// in NEWEST order through its index (searchCandidates); here they become hits — decoded, with their
// snippet and score — and, for RELEVANCE, are ranked. Both orders page by a position (never an
// offset): NEWEST by the last hit's place in that order, RELEVANCE by its score and place, so a
// page never repeats a hit of an earlier one.

export type SearchOrderKind = "newest" | "relevance";

/** Candidates scored between turns of the event loop. */
const HITS_PER_SLICE = 64;

export interface StoredHit extends SearchPosition {
  entryId: string;
  role: Role;
  compaction: boolean;
  timestampMs: number;
  hidden: boolean;
  snippet: string;
  score: number;
}

/** Where a page ends: the last hit's position, and its score for RELEVANCE. */
export interface SearchCursor extends SearchPosition {
  score?: number;
}

export interface SearchPage {
  hits: StoredHit[];
  /** The cursor of the next page; undefined on the last page. */
  next?: SearchCursor;
}

/** Whether `a` comes before `b` in NEWEST order (search.proto, SEARCH_ORDER_NEWEST). */
export function newestFirst(a: SearchPosition, b: SearchPosition): number {
  if (a.createdAtMs !== b.createdAtMs) return b.createdAtMs - a.createdAtMs;
  if (a.sessionId !== b.sessionId) return a.sessionId < b.sessionId ? -1 : 1;
  return b.seq - a.seq;
}

function relevanceFirst(a: StoredHit | SearchCursor, b: StoredHit | SearchCursor): number {
  const d = (b.score ?? 0) - (a.score ?? 0);
  return d !== 0 ? d : newestFirst(a, b);
}

export async function searchPage(
  store: TranscriptStore,
  search: Omit<StoreSearch, "after" | "limit">,
  order: SearchOrderKind,
  limit: number,
  after: SearchCursor | undefined,
): Promise<SearchPage> {
  if (order === "newest") {
    const found = await store.searchCandidates({ ...search, after, limit: limit + 1 });
    const hits = found.slice(0, limit).map((c) => toHit(c, c.payload, search.terms));
    const last = hits[hits.length - 1];
    return { hits, next: found.length > limit && last ? position(last) : undefined };
  }
  const found = await store.searchCandidates({ ...search, limit: RELEVANCE_CANDIDATES });
  // Every candidate is decoded and scanned (up to MAX_INDEXED_WORDS words each): in slices, between
  // turns of the event loop, so that one ranking does not hold every other call.
  const scored: StoredHit[] = [];
  for (let i = 0; i < found.length; i++) {
    if (i > 0 && i % HITS_PER_SLICE === 0) await nextTurn();
    scored.push(toHit(found[i], found[i].payload, search.terms));
  }
  const ranked = scored.sort(relevanceFirst).filter((h) => !after || relevanceFirst(after, h) < 0);
  const hits = ranked.slice(0, limit);
  const last = hits[hits.length - 1];
  return { hits, next: ranked.length > limit && last ? { ...position(last), score: last.score } : undefined };
}

function position(h: SearchPosition): SearchPosition {
  return { createdAtMs: h.createdAtMs, sessionId: h.sessionId, seq: h.seq };
}

function toHit(at: SearchPosition, payload: Uint8Array, terms: SearchTerms): StoredHit {
  const entry = decodeEntry(payload);
  const { snippet, score } = snippetAndScore(entrySearchText(entry), terms);
  const e = entry.entry;
  return {
    ...position(at),
    entryId: entry.id,
    role: e?.$case === "message" ? e.value.role : Role.ROLE_UNSPECIFIED,
    compaction: e?.$case === "compaction",
    timestampMs: entry.timestampMs,
    hidden: entry.hidden,
    snippet,
    score,
  };
}
