/**
 * Leaf and condensed summaries with contextd's extractive summarizer (deterministic, no network).
 *
 * Imported through the package (`contextd/summarizer`), as an engine outside this repository
 * would. The summarizer copies goals, requests, decisions, errors and identifiers verbatim into a
 * sectioned format, and merges a previous summary in that format section by section. Used here:
 * - a leaf is summarized on its own, so the first user request of its span becomes its "Task"
 *   line: a condensed summary then lists the tasks of its span, oldest first, and the identifiers
 *   those requests quote (file paths, URLs, tickets) are pinned by the summarizer when it has to
 *   drop lines — which is what keeps a session's opening facts alive through every level;
 * - condensing summaries = merging them: the children's sections are concatenated under one title
 *   and parsed back as one previous summary (lists concatenate, duplicates collapse, the least
 *   valuable lines go first under the cap). Each child's "Latest user request" except the newest
 *   is refiled under "Earlier user requests", since it is not the latest anymore.
 */
import type { Message } from "contextd/engine-sdk";
import { summarizeExtractive } from "contextd/summarizer";

/** The title line every extractive summary starts with (taken from the summarizer, not hard-coded). */
export const EXTRACTIVE_TITLE = summarizeExtractive({ previousSummary: "", messages: [], maxChars: 10_000 }).split("\n")[0];

const LATEST_HEADING = "## Latest user request";
const EARLIER_HEADING = "## Earlier user requests";

export interface ExtractiveOptions {
  maxChars: number;
  customInstructions?: string;
  signal?: AbortSignal;
}

/** A leaf summary of `messages` (consecutive, oldest first). */
export function extractiveLeaf(messages: Message[], opts: ExtractiveOptions): string {
  return summarizeExtractive({
    previousSummary: "",
    messages,
    maxChars: opts.maxChars,
    customInstructions: opts.customInstructions,
    signal: opts.signal,
  });
}

export function isExtractive(text: string): boolean {
  return text.startsWith(EXTRACTIVE_TITLE);
}

/** One summary of consecutive summaries (oldest first). Texts in another format are clipped and stacked. */
export function extractiveCondense(children: readonly string[], opts: ExtractiveOptions): string {
  if (!children.every(isExtractive)) return stack(children, opts.maxChars);
  const bodies = children.map((text, i) => {
    const body = text.slice(EXTRACTIVE_TITLE.length);
    return i < children.length - 1 ? refileLatest(body) : body;
  });
  return summarizeExtractive({
    previousSummary: EXTRACTIVE_TITLE + bodies.join("\n"),
    messages: [],
    maxChars: opts.maxChars,
    customInstructions: opts.customInstructions,
    signal: opts.signal,
  });
}

/** Turns a "Latest user request" block into a one-line "Earlier user requests" item. */
function refileLatest(body: string): string {
  const lines = body.split("\n");
  const at = lines.findIndex((l) => l.trimEnd() === LATEST_HEADING);
  if (at < 0) return body;
  let end = at + 1;
  while (end < lines.length && !lines[end].startsWith("## ")) end++;
  const request = lines
    .slice(at + 1, end)
    .map((l) => l.trim())
    .filter(Boolean)
    .join(" ");
  const replacement = request ? ["", EARLIER_HEADING, `- ${request}`, ""] : [];
  return [...lines.slice(0, at), ...replacement, ...lines.slice(end)].join("\n");
}

/** Summaries not in the extractive format: each clipped to its share of the cap, oldest first. */
export function stack(children: readonly string[], maxChars: number): string {
  const separator = "\n\n";
  const share = Math.max(0, Math.floor((maxChars - separator.length * (children.length - 1)) / Math.max(1, children.length)));
  return children
    .map((t) => (t.length <= share ? t : `${t.slice(0, Math.max(0, share - 1))}…`))
    .join(separator)
    .slice(0, maxChars);
}
