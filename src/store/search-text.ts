import { createHash } from "node:crypto";

import { fieldError } from "../contract/errors.js";
import type { CompactionEntry, Message, TranscriptEntry } from "../contract/gen/contextd/v1/types.js";

// History search's text handling (proto/contextd/v1/search.proto), shared by both stores so that
// they match the same entries and answer the same snippets and scores: which text of an entry is
// searched, how it is cut into words (the index holds these words, joined by spaces, so that each
// store's own tokenizer sees exactly them), how a query becomes phrases, and a hit's snippet and
// score. Every function here is linear in its input, and its input is bounded.

/** Words of one entry that are indexed (and scanned for snippets and scores). */
export const MAX_INDEXED_WORDS = 10_000;
/** Longer words are not indexed (base64, long hashes): they would bloat the index for no search. */
export const MAX_WORD_CHARS = 100;
/** SearchTranscriptRequest.query's bounds. */
export const MAX_QUERY_CHARS = 512;
export const MAX_QUERY_TERMS = 16;
export const MAX_QUERY_WORDS = 32;
/** Characters of entry text in a snippet (markers and ellipses not counted). */
export const SNIPPET_CHARS = 240;
/** RELEVANCE ranks this many of the newest matches. */
export const RELEVANCE_CANDIDATES = 1000;

/** A word of a text: normalized (lower case, no diacritics) and where it is in the text. */
export interface Word {
  word: string;
  start: number;
  end: number;
}

/** A parsed query: each term a phrase of normalized words; an entry must hold every term. */
export interface SearchTerms {
  terms: string[][];
}

/** The searched text of a message: text, thinking, tool calls, tool name, error message. */
export function messageSearchText(m: Message): string {
  const parts: string[] = [];
  for (const c of m.content ?? []) {
    const b = c.block;
    if (!b) continue;
    if (b.$case === "text") parts.push(b.value.text);
    else if (b.$case === "thinking") parts.push(b.value.thinking);
    else if (b.$case === "toolCall") parts.push(b.value.name, b.value.argumentsJson);
  }
  if (m.toolName) parts.push(m.toolName);
  if (m.errorMessage) parts.push(m.errorMessage);
  return parts.filter((p) => p).join("\n");
}

export function compactionSearchText(c: CompactionEntry): string {
  return c.summary ?? "";
}

/** The searched text of an entry ("" for custom and runtime entries). */
export function entrySearchText(entry: TranscriptEntry): string {
  const e = entry.entry;
  if (e?.$case === "message") return messageSearchText(e.value);
  if (e?.$case === "compaction") return compactionSearchText(e.value);
  return "";
}

const ASCII = /^[\x00-\x7f]*$/;
const ASCII_WORD = /[A-Za-z0-9]+/g;
const WORD = /[\p{L}\p{N}\p{M}]+/gu;
const NOT_WORD = /[^\p{L}\p{N}]+/u;
const MARKS = /\p{M}+/gu;

/**
 * The words of `text`, at most `max`: runs of letters and digits, lower-cased, diacritics removed
 * (NFKD, marks dropped); words longer than MAX_WORD_CHARS are skipped.
 */
export function words(text: string, max = MAX_INDEXED_WORDS): Word[] {
  const out: Word[] = [];
  if (ASCII.test(text)) {
    for (const m of text.matchAll(ASCII_WORD)) {
      if (m[0].length > MAX_WORD_CHARS) continue;
      out.push({ word: m[0].toLowerCase(), start: m.index, end: m.index + m[0].length });
      if (out.length >= max) break;
    }
    return out;
  }
  for (const m of text.matchAll(WORD)) {
    const raw = m[0];
    const start = m.index;
    const end = start + raw.length;
    const norm = raw.normalize("NFKD").replace(MARKS, "").toLowerCase();
    for (const w of norm.split(NOT_WORD)) {
      if (w === "" || w.length > MAX_WORD_CHARS) continue;
      out.push({ word: w, start, end });
      if (out.length >= max) return out;
    }
  }
  return out;
}

const LOWER_ASCII_WORD = /[a-z0-9]+/g;
const ASCII_RUN = /[\x00-\x7f]+/g;
const WORD_CHAR = /[\p{L}\p{N}\p{M}]/u;

/** What the index holds for `text`: its words joined by single spaces ("" for none). */
export function indexText(text: string): string {
  if (!text) return "";
  return (
    asciiIndexText(text) ??
    words(text)
      .map((w) => w.word)
      .join(" ")
  );
}

/**
 * indexText of the common case, on every append, at a fraction of words()' cost: text whose words
 * are all ASCII (anything else in it, ✓ or —, only separates) — the same words as words() finds.
 * Undefined for any other text.
 */
function asciiIndexText(text: string): string | undefined {
  if (!ASCII.test(text) && WORD_CHAR.test(text.replace(ASCII_RUN, ""))) return undefined;
  const found = text.toLowerCase().match(LOWER_ASCII_WORD);
  if (!found) return "";
  const kept = found.length > MAX_INDEXED_WORDS || found.some((w) => w.length > MAX_WORD_CHARS) ? found.filter((w) => w.length <= MAX_WORD_CHARS) : found;
  return (kept.length > MAX_INDEXED_WORDS ? kept.slice(0, MAX_INDEXED_WORDS) : kept).join(" ");
}

/** The index text of an entry. */
export function entryIndexText(entry: TranscriptEntry): string {
  return indexText(entrySearchText(entry));
}

/**
 * Parses a query (search.proto: words and "quoted phrases", all required; nothing else is syntax).
 * INVALID_ARGUMENT naming `field` for an empty, too long or wordless query.
 */
export function parseQuery(query: string, field = "query"): SearchTerms {
  if (typeof query !== "string" || query.trim() === "") throw fieldError(field, "is required: the words to search for");
  if (query.length > MAX_QUERY_CHARS) throw fieldError(field, `is ${query.length} characters, over the ${MAX_QUERY_CHARS} a query may have`);
  const chunks: string[] = [];
  let phrase = false;
  let current = "";
  const flush = () => {
    if (current) chunks.push(current);
    current = "";
  };
  for (const ch of query) {
    if (ch === '"') {
      flush();
      phrase = !phrase;
    } else if (!phrase && /\s/.test(ch)) flush();
    else current += ch;
  }
  flush();
  const terms: string[][] = [];
  const seen = new Set<string>();
  let total = 0;
  for (const chunk of chunks) {
    const ws = words(chunk, MAX_QUERY_WORDS + 1).map((w) => w.word);
    if (ws.length === 0) continue;
    const key = ws.join(" ");
    if (seen.has(key)) continue;
    seen.add(key);
    terms.push(ws);
    total += ws.length;
  }
  if (terms.length === 0) throw fieldError(field, "has no letter or digit to search for");
  if (terms.length > MAX_QUERY_TERMS) throw fieldError(field, `has ${terms.length} words or phrases, over the ${MAX_QUERY_TERMS} a query may have`);
  if (total > MAX_QUERY_WORDS) throw fieldError(field, `has over ${MAX_QUERY_WORDS} words`);
  return { terms };
}

/** A digest of the parsed query: what page tokens are bound to (two spellings of one query share it). */
export function queryDigest(q: SearchTerms): string {
  return createHash("sha256").update(JSON.stringify(q.terms)).digest("base64url");
}

/**
 * The SQLite FTS5 MATCH expression of a query: each term a double-quoted string of words joined
 * by spaces, ANDed, on column `body`. Words are letters and digits only, so no user text is ever
 * FTS5 syntax (no quote, operator or column name can appear inside a string).
 */
export function fts5Match(q: SearchTerms): string {
  return q.terms.map((t) => `body : "${t.join(" ")}"`).join(" AND ");
}

/** The PostgreSQL tsquery literal of a query: phrases (`<->`) ANDed; words are letters and digits only. */
export function tsqueryLiteral(q: SearchTerms): string {
  return q.terms.map((t) => (t.length === 1 ? `'${t[0]}'` : `(${t.map((w) => `'${w}'`).join(" <-> ")})`)).join(" & ");
}

const agentTokens = new Map<string, string>();

/** The agent's token in the SQLite index's `agent` column: letters and digits, one word (remembered: one per entry written). */
export function agentToken(agentId: string): string {
  let token = agentTokens.get(agentId);
  if (token === undefined) {
    token = `a${createHash("sha256").update(agentId, "utf8").digest("hex").slice(0, 24)}`;
    if (agentTokens.size >= 1024) agentTokens.clear();
    agentTokens.set(agentId, token);
  }
  return token;
}

/** Where each term occurs in `ws`: [first word index, last word index] pairs, in text order. */
function occurrences(ws: readonly Word[], q: SearchTerms): { term: number; first: number; last: number }[] {
  const out: { term: number; first: number; last: number }[] = [];
  for (let i = 0; i < ws.length; i++) {
    q.terms.forEach((t, ti) => {
      if (i + t.length > ws.length) return;
      for (let k = 0; k < t.length; k++) if (ws[i + k].word !== t[k]) return;
      out.push({ term: ti, first: i, last: i + t.length - 1 });
    });
  }
  return out;
}

const K1 = 1.2;
const B = 0.75;
const AVG_WORDS = 64;

/** A hit's snippet and score (search.proto, SearchHit), from its entry's text alone. */
export function snippetAndScore(text: string, q: SearchTerms): { snippet: string; score: number } {
  const ws = words(text);
  const occ = occurrences(ws, q);
  const tf = new Array<number>(q.terms.length).fill(0);
  for (const o of occ) tf[o.term] += 1;
  const norm = K1 * (1 - B + (B * ws.length) / AVG_WORDS);
  const score = tf.reduce((sum, f) => sum + (f === 0 ? 0 : (f * (K1 + 1)) / (f + norm)), 0);
  return { snippet: snippet(text, ws, occ), score: Math.round(score * 1e6) / 1e6 };
}

function snippet(text: string, ws: readonly Word[], occ: readonly { first: number; last: number }[]): string {
  let start = 0;
  if (occ.length > 0) {
    const first = ws[occ[0].first].start;
    const matchEnd = ws[occ[0].last].end;
    // The match about a third in, when the text is longer than the snippet.
    start = Math.max(0, Math.min(first - Math.floor((SNIPPET_CHARS - (matchEnd - first)) / 3), text.length - SNIPPET_CHARS));
    if (start > first) start = first;
  }
  let end = Math.min(text.length, start + SNIPPET_CHARS);
  // Never cut a surrogate pair.
  if (start > 0 && isLowSurrogate(text.charCodeAt(start))) start += 1;
  if (end < text.length && isLowSurrogate(text.charCodeAt(end))) end -= 1;
  const marks: { at: number; mark: string }[] = [];
  for (const o of occ) {
    const s = ws[o.first].start;
    const e = ws[o.last].end;
    if (s < start || e > end) continue;
    // Overlapping matches (a phrase inside another) are marked once.
    if (marks.length > 0 && s < marks[marks.length - 1].at) continue;
    marks.push({ at: s, mark: "«" }, { at: e, mark: "»" });
  }
  let out = start > 0 ? "…" : "";
  let pos = start;
  for (const m of marks) {
    out += shown(text.slice(pos, m.at)) + m.mark;
    pos = m.at;
  }
  out += shown(text.slice(pos, end));
  if (end < text.length) out += "…";
  return out;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Entry text as a snippet shows it: its own « » as ‹ ›, line breaks and tabs as spaces. */
function shown(s: string): string {
  return s
    .replace(/«/g, "‹")
    .replace(/»/g, "›")
    .replace(/[\r\n\t]/g, " ");
}
