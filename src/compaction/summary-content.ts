import { blockText } from "../contract/messages.js";
import { CALL_PATH_SLICE_MS, TimeSlices } from "../contract/time-slices.js";
import type { Message } from "../contract/gen/contextd/v1/types.js";
import { COMPACT_LABELS, SECTIONS, SUMMARY_TITLE } from "./summarizer/extract-format.js";
import { LATEST_REQUEST_HEADING } from "./latest-request.js";

/**
 * Whether a summary says anything: a committed summary must carry content from what it replaces
 * (the previous summary and the messages folded into it), not only the summarizer's scaffolding
 * (the extractive title and headings) or a model's boilerplate.
 *
 * The test is deliberately lenient — a paraphrase passes — but a summary must share at least one
 * *content word* with its sources: a word of 3 or more letters or digits, or any word holding a
 * digit or one of `_./:-` (identifiers, numbers, paths), that is neither scaffolding, nor a common
 * function word, nor one of the few words every summary uses. Sources with no such word at all (a
 * lone "ok") need any word of theirs in the summary. Linear in the length of the summary and the sources (one
 * scan each, a set of the summary's words, a stop at the first shared one), and done in time slices
 * (time-slices.ts): the sources of one compaction can be megabytes, which scanned in one go held the
 * event loop for other tenants' calls for tens of milliseconds.
 */
export async function carriesContent(summary: string, previousSummary: string, replaced: readonly Message[]): Promise<boolean> {
  const slices = new TimeSlices(CALL_PATH_SLICE_MS);
  // Content words of the summary, and — for sources too short to have any ("ok", "yes") — every
  // word that is not scaffolding.
  const strong = new Set<string>();
  const weak = new Set<string>();
  for (const w of words(summary)) (isContentWord(w) ? strong : weak).add(w);
  if (strong.size === 0 && weak.size === 0) return false;
  let sourcesHaveContent = false;
  let weakShared = false;
  const scan = (text: string): boolean => {
    for (const w of words(text)) {
      if (isContentWord(w)) {
        sourcesHaveContent = true;
        if (strong.has(w)) return true;
      } else if (weak.has(w)) weakShared = true;
    }
    return false;
  };
  if (scan(previousSummary)) return true;
  for (const m of replaced) {
    if (slices.due()) await slices.yield();
    for (const block of m.content) if (scan(blockText(block))) return true;
    if (m.toolName && scan(m.toolName)) return true;
  }
  return !sourcesHaveContent && weakShared;
}

// A word: letters and digits, joined by the characters identifiers use inside them.
const WORD = /[\p{L}\p{N}]+(?:[_./:\-][\p{L}\p{N}]+)*/gu;
const MARKED = /[\p{N}_./:-]/u;

/** Words that say nothing of a conversation: the summarizers' own scaffolding and summary boilerplate. */
const STOP = new Set(
  [
    SUMMARY_TITLE,
    ...SECTIONS.map((s) => s.heading),
    LATEST_REQUEST_HEADING,
    ...COMPACT_LABELS,
    "the and for are was but not you all any can had her him his its our out she has how who why did get got let may now off own say too use way yes",
    "this that these those with from into about have been were will would could should there their what when where which while then than",
    "user users assistant conversation conversations summary summaries earlier previous before after latest request requests message messages",
    "none nothing empty content context history compacted compaction verbatim",
  ]
    .join(" ")
    .toLowerCase()
    .match(WORD) ?? [],
);

/** The words of `text`, lower case, scaffolding and function words left out. */
function* words(text: string): Generator<string> {
  if (!text) return;
  for (const match of text.matchAll(WORD)) {
    const w = match[0].toLowerCase();
    if (!STOP.has(w)) yield w;
  }
}

function isContentWord(w: string): boolean {
  return w.length >= 3 || MARKED.test(w);
}
