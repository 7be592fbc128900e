/**
 * The extractive summary's text format, and its parser (so a later compaction can merge an
 * earlier summary section by section).
 *
 *   # Conversation summary (contextd extractive v1)
 *
 *   ## Goals and constraints
 *   - Task: Migrate the config loader to YAML.
 *   - Never read /etc/contextd.conf directly.
 *
 *   ## Latest user request
 *   Now make the tests pass.
 *   ...
 *
 * List sections hold one "- item" per line; block sections (Focus, Latest user request) hold text
 * verbatim; "Earlier summary" holds another engine's summary line by line.
 */
import { ID_KINDS, type IdKind, type Identifier } from "./extract-identifiers.js";
import { TimelineParser, renderTimeline } from "./extract-timeline.js";

export const SUMMARY_TITLE = "# Conversation summary (contextd extractive v1)";

export type SectionId =
  "focus" | "goals" | "latest" | "requests" | "decisions" | "errors" | "identifiers" | "facts" | "notes" | "progress" | "tools" | "earlier";

/** Sections in render order, with their headings. */
export const SECTIONS: ReadonlyArray<{ id: SectionId; heading: string; block?: boolean }> = [
  { id: "focus", heading: "## Focus", block: true },
  { id: "goals", heading: "## Goals and constraints" },
  { id: "latest", heading: "## Latest user request", block: true },
  { id: "requests", heading: "## Earlier user requests" },
  { id: "decisions", heading: "## Decisions" },
  { id: "errors", heading: "## Errors" },
  { id: "identifiers", heading: "## Identifiers" },
  { id: "facts", heading: "## Facts" },
  { id: "notes", heading: "## Relevant to focus" },
  { id: "progress", heading: "## Progress" },
  { id: "tools", heading: "## Tool activity" },
  { id: "earlier", heading: "## Earlier summary", block: true },
];

const BY_HEADING = new Map(SECTIONS.map((s) => [s.heading, s]));

/** Everything a summary holds, as plain data. */
export interface SummaryDoc {
  focus: string;
  goals: string[];
  latest: string;
  requests: string[];
  decisions: string[];
  errors: string[];
  identifiers: Identifier[];
  /**
   * Short verbatim clauses with dates, names, numbers, places, activities (see extract-facts.ts),
   * held as "[8 May 2023] Caroline: …" and rendered grouped by date (see extract-timeline.ts).
   */
  facts: string[];
  notes: string[];
  progress: string[];
  tools: string[];
  /** Lines of a summary written by something else (another engine, an LLM summarizer). */
  earlier: string[];
}

export function emptyDoc(): SummaryDoc {
  return {
    focus: "",
    goals: [],
    latest: "",
    requests: [],
    decisions: [],
    errors: [],
    identifiers: [],
    facts: [],
    notes: [],
    progress: [],
    tools: [],
    earlier: [],
  };
}

/** A line inside block text that would read as one of our headings is indented by one space. */
export function escapeBlock(text: string): string {
  return text
    .split("\n")
    .map((line) => (BY_HEADING.has(line.trimEnd()) || line.startsWith(SUMMARY_TITLE) ? ` ${line}` : line))
    .join("\n");
}

function unescapeBlock(text: string): string {
  return text
    .split("\n")
    .map((line) => {
      const t = line.slice(1);
      return line.startsWith(" ") && (BY_HEADING.has(t.trimEnd()) || t.startsWith(SUMMARY_TITLE)) ? t : line;
    })
    .join("\n");
}

export function identifierLine(id: Identifier): string {
  return `- ${id.kind}: ${id.value}`;
}

const KIND_SET = new Set<string>(ID_KINDS);

/** Parses a summary this summarizer wrote; undefined when `text` is in some other format. */
export function parseSummary(text: string): SummaryDoc | undefined {
  const start = text.indexOf(SUMMARY_TITLE);
  if (start < 0) return undefined;
  const doc = emptyDoc();
  const lines = text
    .slice(start + SUMMARY_TITLE.length)
    .replace(/\r\n?/g, "\n")
    .split("\n");
  let current: (typeof SECTIONS)[number] | undefined;
  let block: string[] = [];
  const timeline = new TimelineParser();
  const flush = (): void => {
    if (!current) return;
    if (current.block) {
      const body = unescapeBlock(block.join("\n")).replace(/^\n+/, "").trimEnd();
      if (current.id === "focus") doc.focus = body;
      else if (current.id === "latest") doc.latest = body;
      else doc.earlier.push(...body.split("\n").filter((l) => l.trim()));
    }
    block = [];
  };
  for (const line of lines) {
    const section = BY_HEADING.get(line.trimEnd());
    if (section) {
      flush();
      current = section;
      continue;
    }
    if (!current) continue;
    if (current.block) {
      block.push(line);
      continue;
    }
    const trimmed = line.trim();
    if (!trimmed) continue;
    const item = trimmed.startsWith("- ") ? trimmed.slice(2).trim() : trimmed;
    if (!item) continue;
    if (current.id === "identifiers") {
      const colon = item.indexOf(": ");
      const kind = colon > 0 ? item.slice(0, colon) : "";
      if (KIND_SET.has(kind)) doc.identifiers.push({ kind: kind as IdKind, value: item.slice(colon + 2).trim() });
      else doc.identifiers.push({ kind: "symbol", value: item });
      continue;
    }
    if (current.id === "facts") {
      const read = timeline.line(trimmed);
      if (read.header) continue;
      if (!trimmed.startsWith("- ") && doc.facts.length > 0) doc.facts[doc.facts.length - 1] += ` ${item}`;
      else doc.facts.push(read.item);
      continue;
    }
    const list = doc[current.id as Exclude<SectionId, "focus" | "latest" | "earlier" | "identifiers" | "facts">];
    if (!trimmed.startsWith("- ") && list.length > 0) list[list.length - 1] += ` ${item}`;
    else list.push(item);
  }
  flush();
  return doc;
}

/** Lines of one section as rendered (without its heading). */
export function sectionLines(doc: SummaryDoc, id: SectionId): string[] {
  switch (id) {
    case "focus":
      return doc.focus ? [escapeBlock(doc.focus)] : [];
    case "latest":
      return doc.latest ? [escapeBlock(doc.latest)] : [];
    case "earlier":
      return doc.earlier.map((l) => escapeBlock(l));
    case "identifiers":
      return doc.identifiers.map(identifierLine);
    case "facts":
      return renderTimeline(doc.facts);
    default:
      return doc[id].map((item) => `- ${item}`);
  }
}

/**
 * The labels of the compact form (renderCompact): what a summary looks like when its cap is too
 * small for the sectioned format — no title, no headings, one line each for the identifiers, the
 * latest user request and the task, as much of each as fits.
 *
 *   Ids: src/billing/invoice_rounding.ts, BILL-4821, roundHalfEven()
 *   Request: Now make the rounding tests pass […] in CI
 */
export const COMPACT_LABELS = ["Ids:", "Request:", "Task:"] as const;

/** The cap below which the extractive summarizer writes the compact form. */
export const COMPACT_BELOW_CHARS = 360;

/**
 * The compact form within `maxChars`: identifiers first (best first: up to about half the cap
 * while a latest request is waiting, but the best one that fits in any case), then the latest
 * request cut to what is left (head and tail kept), then more identifiers and the task if room is
 * left; "" when not even one item fits. Linear in the number of identifiers.
 */
export function renderCompact(ids: readonly string[], latest: string, task: string, maxChars: number, clipText: (s: string, max: number) => string): string {
  const [idsLabel, requestLabel, taskLabel] = COMPACT_LABELS;
  // A request or task cut to under a dozen characters says nothing.
  const MIN_TEXT = 12;
  const taken = new Set<number>();
  const extend = (line: string, limit: number): string => {
    ids.forEach((id, i) => {
      if (taken.has(i)) return;
      const next = line ? `${line}, ${id}` : `${idsLabel} ${id}`;
      // One that does not fit is skipped: a shorter one after it may.
      if (next.length > limit) return;
      line = next;
      taken.add(i);
    });
    return line;
  };
  let idLine = extend("", latest ? Math.floor(maxChars / 2) : maxChars);
  if (!idLine) idLine = extend("", maxChars);
  const sep = (line: string) => (line ? line.length + 1 : 0);
  let requestLine = "";
  const forRequest = maxChars - sep(idLine) - requestLabel.length - 1;
  if (latest && forRequest >= MIN_TEXT) requestLine = `${requestLabel} ${clipText(latest, forRequest)}`;
  idLine = extend(idLine, maxChars - sep(requestLine));
  let taskLine = "";
  const forTask = maxChars - sep(idLine) - sep(requestLine) - taskLabel.length - 1;
  if (task && forTask >= MIN_TEXT * 2) taskLine = `${taskLabel} ${clipText(task, forTask)}`;
  return [idLine, requestLine, taskLine].filter((l) => l !== "").join("\n");
}

/** Renders lines grouped by section: title, then "\n\n## Heading" and "\n" + line per line. */
export function renderSections(lines: ReadonlyMap<SectionId, readonly string[]>): string {
  let out = SUMMARY_TITLE;
  for (const s of SECTIONS) {
    const ls = lines.get(s.id);
    if (!ls || ls.length === 0) continue;
    out += `\n\n${s.heading}`;
    for (const l of ls) out += `\n${l}`;
  }
  return out;
}
