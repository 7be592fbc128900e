/**
 * Text helpers for the extractive summarizer: clipping, dedupe keys, splitting prose into
 * sentences (outside fenced code) and keyword matching for `customInstructions`.
 * Everything here is linear in its input and free of backtracking-prone regexes.
 */

/** Collapses all whitespace runs (newlines included) to one space and trims. */
export function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** Cut position that does not split a UTF-16 surrogate pair. */
function safeCut(s: string, at: number): number {
  if (at <= 0) return 0;
  const code = s.charCodeAt(at - 1);
  return code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
}

/** `s` cut to at most `max` characters; a cut is marked with a trailing ellipsis. */
export function clip(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max <= 1) return max <= 0 ? "" : "…";
  return s.slice(0, safeCut(s, max - 1)).trimEnd() + "…";
}

const ELISION = " […] ";

/** `s` cut to at most `max` characters keeping its head (2/3) and its tail (1/3). */
export function clipHeadTail(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max < ELISION.length + 24) return clip(s, max);
  const room = max - ELISION.length;
  const head = Math.ceil((room * 2) / 3);
  const tail = room - head;
  const tailStart = s.length - tail;
  const tailCut = s.charCodeAt(tailStart) >= 0xdc00 && s.charCodeAt(tailStart) <= 0xdfff ? tailStart + 1 : tailStart;
  return s.slice(0, safeCut(s, head)).trimEnd() + ELISION + s.slice(tailCut).trimStart();
}

const KEY_TRAILING = new Set([" ", ".", ";", ":", ",", "!", "?", "…"]);

/** The key two items are considered duplicates under: case-, whitespace- and end-punctuation-insensitive. */
export function dedupeKey(s: string): string {
  const t = oneLine(s).toLowerCase();
  let end = t.length;
  while (end > 0 && KEY_TRAILING.has(t[end - 1])) end--;
  return t.slice(0, end);
}

/** Normalises typographic apostrophes so "I’ll" matches like "I'll". */
export function plainQuotes(s: string): string {
  return s.replace(/[\u2018\u2019\u02bc]/g, "'");
}

export interface SplitText {
  /** Prose lines (outside fenced code), bullet/heading markers stripped, never empty. */
  prose: string[];
  /** Lines inside fenced code blocks, trimmed, never empty. */
  code: string[];
}

const FENCE = /^\s*(```|~~~)/;
const LINE_MARKER = /^\s*(?:[-*+•>]\s+|#{1,6}\s+|\d{1,3}[.)]\s+)+/;

/** Splits text into prose lines and fenced-code lines. */
export function splitText(text: string): SplitText {
  const prose: string[] = [];
  const code: string[] = [];
  let inFence = false;
  for (const raw of text.split("\n")) {
    if (FENCE.test(raw)) {
      inFence = !inFence;
      continue;
    }
    const line = raw.trim();
    if (!line) continue;
    if (inFence) code.push(line);
    else {
      const stripped = line.replace(LINE_MARKER, "").trim();
      if (stripped) prose.push(stripped);
    }
  }
  return { prose, code };
}

/** Sentence boundary: terminal punctuation, whitespace, then something that is not a lowercase letter. */
const SENTENCE_BREAK = /(?<=[.!?])\s+(?=[^\sa-z])/;

/** Sentences of one prose line. */
export function sentencesOf(line: string): string[] {
  if (line.length > 4000) line = line.slice(0, 4000);
  const out: string[] = [];
  for (const s of line.split(SENTENCE_BREAK)) {
    const t = s.trim();
    if (t) out.push(t);
  }
  return out;
}

const STOPWORDS = new Set(
  (
    "the and for with that this from into about focus focusing keep please summary summarize summarise " +
    "compact compaction should what when only more less also just make sure any all our your their them they " +
    "have has been being will would could can how why where which who its it's are was were not but you " +
    "mainly especially particular particularly important details detail everything anything things thing " +
    "conversation context preserve retain remember"
  ).split(" "),
);

/** Lowercased content words of custom instructions (at most 24), in first-seen order. */
export function focusKeywords(instructions: string | undefined): string[] {
  if (!instructions) return [];
  const out: string[] = [];
  const seen = new Set<string>();
  for (const m of instructions
    .slice(0, 2000)
    .toLowerCase()
    .matchAll(/[\p{L}\p{N}_][\p{L}\p{N}_./-]*/gu)) {
    const w = m[0].replace(/[./-]+$/, "");
    if (w.length < 3 || STOPWORDS.has(w) || seen.has(w)) continue;
    seen.add(w);
    out.push(w);
    if (out.length >= 24) break;
  }
  return out;
}

/** How many of the keywords occur in `text` (case-insensitive substring match). */
export function focusMatches(text: string, keywords: readonly string[]): number {
  if (keywords.length === 0) return 0;
  const lower = text.toLowerCase();
  let n = 0;
  for (const k of keywords) if (lower.includes(k)) n++;
  return n;
}

/** Appends `items` to `into` unless their dedupe key was already seen; keeps first-seen order. */
export function pushUnique(into: string[], seen: Set<string>, items: Iterable<string>): void {
  for (const item of items) {
    const key = dedupeKey(item);
    if (!key || seen.has(key)) continue;
    seen.add(key);
    into.push(item);
  }
}

/** Deduplicated copy of `items`, first occurrence kept. */
export function unique(items: Iterable<string>): string[] {
  const out: string[] = [];
  pushUnique(out, new Set(), items);
  return out;
}
