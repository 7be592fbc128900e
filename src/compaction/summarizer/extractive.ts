/**
 * The `extractive` summarizer: the legacy engine's default, deterministic, no-network summarizer.
 *
 * It does not paraphrase. It copies out, verbatim, what an agent needs after compaction — the
 * user's goals and constraints, the latest user request, the assistant's decisions, error lines,
 * identifiers (paths, function names, URLs, tickets, versions, error messages, numbers with units)
 * a short tool log and, for conversations, short fact clauses with dates, names, numbers, places and
 * activities (see extract-facts.ts), grouped by date with their speakers (extract-timeline.ts) —
 * into a fixed sectioned format (see extract-format.ts). Conversation or coding session is decided
 * from what the summary holds: no tool activity and no file, function or error identifiers make a
 * conversation, whose facts get most of the cap; otherwise facts keep a small share and the coding
 * sections theirs (a mixed session is a coding one with a few facts). A previous summary
 * in that format is parsed back and merged section by section, so what the first turns established
 * survives any number of compactions; a summary in any other format is kept as "Earlier summary".
 * The output never exceeds `maxChars`: the least valuable lines go first (see extract-budget.ts).
 *
 * One pass over the input, regexes without catastrophic backtracking, bulk tool output scanned
 * only at its head and tail: a 150-message, 120k-token conversation takes a few milliseconds.
 */
import type { SummarizeInput, TextSummarizer } from "./summarizer.js";
import { fitToBudget, type Entry } from "./extract-budget.js";
import { COMPACT_BELOW_CHARS, emptyDoc, escapeBlock, identifierLine, parseSummary, renderCompact, type SectionId, type SummaryDoc } from "./extract-format.js";
import { KIND_WEIGHT } from "./extract-identifiers.js";
import { FAILED, collect, constraintStrength, decisionWeight, type Collected, type ScoredIdentifier } from "./extract-messages.js";
import { factClause, factContext, factSignal, factSpeaker } from "./extract-facts.js";
import { isFiller, SpeakerNames } from "./extract-filler.js";
import { dateHeader, splitFact, timelineOrder } from "./extract-timeline.js";
import { clip, clipHeadTail, dedupeKey, focusKeywords, focusMatches, oneLine, unique } from "./extract-text.js";

export const EXTRACTIVE_KIND = "extractive";
const NO_NAMES = new SpeakerNames();
/** Used when `maxChars` is not a finite number (a finite cap, even 0, is always honoured). */
export const DEFAULT_MAX_CHARS = 16_000;

/** Soft caps (newest kept) on low-value sections, so a long session's summary stays focused. */
const KEEP = { requests: 20, notes: 20, progress: 30, tools: 40 } as const;
const ITEM_CAP = 400;
const REQUEST_CAP = 300;
const TASK_CAP = 600;
const FOCUS_CAP = 300;
/** Identifiers considered at most (by score) before fitting; more could never fit anyway. */
const MAX_IDENTIFIERS = 1000;
/** Keep-value added to an identifier carried over from the previous summary (as much as a user mention). */
const SURVIVOR_BONUS = 3;
/** How much of the goals (and of the errors) is searched for quoted identifiers. */
const PINNED_SCAN = 32_000;
/** Keep-value added to an identifier quoted by a goal, a constraint or the latest request. */
const PINNED_BONUS = 4;
/**
 * Share of the cap the Facts section keeps. In a conversation (no tool activity, no files,
 * functions or errors) that share is protected like identifiers; in a coding session facts are
 * held to a small share and go early under pressure.
 */
const FACT_SHARE_CHAT = 0.85;
const FACT_SHARE_CODING = 0.08;
/** Tier of a conversation's protected facts: after identifiers, before goals. */
const FACT_CORE_TIER = 7.5;

export function createExtractiveSummarizer(): TextSummarizer {
  return {
    kind: EXTRACTIVE_KIND,
    summarize: async (input: SummarizeInput): Promise<string> => summarizeExtractive(input),
  };
}

function abortError(signal: AbortSignal): Error {
  const err = new Error("summarization aborted", { cause: signal.reason });
  err.name = "AbortError";
  return err;
}

/** The summarizer's synchronous core (throws an AbortError when `signal` is or becomes aborted). */
export function summarizeExtractive(input: SummarizeInput): string {
  const { signal } = input;
  const checkAbort = (): void => {
    if (signal?.aborted) throw abortError(signal);
  };
  checkAbort();
  const maxChars = Number.isFinite(input.maxChars) ? Math.max(0, Math.floor(input.maxChars)) : DEFAULT_MAX_CHARS;
  const keywords = focusKeywords(input.customInstructions);
  const collected = collect(input.messages ?? [], keywords, checkAbort);

  let previous = (input.previousSummary ?? "").trim();
  if (!previous && collected.embeddedSummary.trim()) previous = collected.embeddedSummary.trim();
  const parsed = previous ? parseSummary(previous) : undefined;
  const prev = parsed ?? emptyDoc();
  if (previous && !parsed) prev.earlier = foreignLines(previous, maxChars);

  const { doc, scores } = merge(prev, collected, previous !== "", input.customInstructions ?? "", maxChars);
  checkAbort();
  if (maxChars < COMPACT_BELOW_CHARS) return compactForm(doc, scores, maxChars);
  const shares = isConversation(doc) ? { facts: FACT_SHARE_CHAT } : {};
  return fitToBudget(entriesOf(doc, scores, keywords, maxChars), maxChars, shares);
}

/**
 * A summary for a cap too small for the sectioned format (a title and a heading alone would use
 * most of it): the best identifiers and the latest request, then the task. An earlier summary in
 * another format (a compact one included) contributes its first line when nothing else is known.
 */
function compactForm(doc: SummaryDoc, scores: ReadonlyMap<string, number>, maxChars: number): string {
  const ids = doc.identifiers.map((id) => id.value).sort((a, b) => (scores.get(b) ?? 0) - (scores.get(a) ?? 0));
  const task = doc.goals.find((g) => g.startsWith("Task: "))?.slice("Task: ".length) ?? doc.goals[0] ?? "";
  const latest = oneLine(doc.latest || doc.requests.at(-1) || doc.decisions.at(-1) || doc.earlier[0] || doc.facts.at(-1) || "");
  return renderCompact(ids, latest, oneLine(task), maxChars, clipHeadTail);
}

/** Another summarizer's summary, line by line, cut to a share of the budget. */
function foreignLines(text: string, maxChars: number): string[] {
  const cap = Math.min(6000, Math.max(200, Math.floor(maxChars * 0.3)));
  const out: string[] = [];
  let used = 0;
  for (const raw of text.replace(/\r\n?/g, "\n").split("\n")) {
    const line = raw.trimEnd();
    if (!line.trim()) continue;
    if (used + line.length > cap) {
      const room = cap - used;
      if (room > 40) out.push(clip(line, room));
      out.push("[…earlier summary truncated]");
      break;
    }
    out.push(clip(line, 1000));
    used += Math.min(line.length, 1000) + 1;
  }
  return out;
}

function newest(items: string[], n: number): string[] {
  return items.length > n ? items.slice(items.length - n) : items;
}

/** Collapses consecutive identical tool lines into "line (×n)". */
function mergeRuns(items: readonly string[]): string[] {
  const out: Array<{ base: string; n: number }> = [];
  for (const item of items) {
    const m = / \(×(\d+)\)$/.exec(item);
    const base = m ? item.slice(0, m.index) : item;
    const n = m ? Number(m[1]) : 1;
    const last = out[out.length - 1];
    if (last && last.base === base) last.n += n;
    else out.push({ base, n });
  }
  return out.map((r) => (r.n > 1 ? `${r.base} (×${r.n})` : r.base));
}

interface Merged {
  doc: SummaryDoc;
  /** Keep-value of each identifier, by value. */
  scores: Map<string, number>;
}

function merge(prev: SummaryDoc, c: Collected, hadPrevious: boolean, instructions: string, maxChars: number): Merged {
  const doc = emptyDoc();
  doc.focus = clip(oneLine(instructions), FOCUS_CAP);

  const requests = c.requests;
  // A greeting is no task ("Hi! How are you?" opening a chat).
  const firstIsTask = requests.length > 0 && !isFiller(requests[0], NO_NAMES);
  const task = !hadPrevious && firstIsTask ? [`Task: ${clipHeadTail(oneLine(requests[0]), TASK_CAP)}`] : [];
  // Constraint sentences already quoted whole inside the task line are not repeated.
  const inTask = task.length > 0 ? task[0] : "";
  const goals = c.goals.filter((g) => !inTask.includes(oneLine(g)));
  doc.goals = unique([...prev.goals, ...task, ...goals].map((g) => clip(oneLine(g), TASK_CAP)));

  const latestCap = Math.min(6000, Math.max(400, Math.floor(maxChars * 0.35)));
  const latestRaw = requests.length > 0 ? requests[requests.length - 1] : c.latestTurn || prev.latest;
  doc.latest = clipHeadTail(latestRaw.trim(), latestCap);

  // A transcript turn that stood as the latest message is no earlier request: its facts are kept.
  const prevLatestIsRequest = prev.latest !== "" && !factContext(prev.latest).speaker;
  const earlierRequests = [
    ...prev.requests,
    ...(requests.length > 0 && prevLatestIsRequest ? [prev.latest] : []),
    ...requests.slice(task.length > 0 || (!hadPrevious && !firstIsTask) ? 1 : 0, -1),
  ].map((r) => clip(oneLine(r), REQUEST_CAP));
  const latestKey = dedupeKey(clip(oneLine(doc.latest), REQUEST_CAP));
  doc.requests = newest(
    unique(earlierRequests).filter((r) => dedupeKey(r) !== latestKey),
    KEEP.requests,
  );

  doc.decisions = unique([...prev.decisions, ...c.decisions].map((d) => clip(oneLine(d), ITEM_CAP)));
  doc.errors = unique([...prev.errors, ...c.errors].map((e) => clip(oneLine(e), ITEM_CAP)));
  doc.progress = newest(unique([...prev.progress, ...c.progress]), KEEP.progress);
  doc.tools = newest(mergeRuns([...prev.tools, ...c.tools].map((t) => clip(oneLine(t), 240))), KEEP.tools);

  const taken = new Set([...doc.goals, ...doc.decisions, ...doc.progress].map(dedupeKey));
  doc.notes = newest(
    unique([...prev.notes, ...c.notes]).filter((n) => !taken.has(dedupeKey(n))),
    KEEP.notes,
  );
  doc.earlier = prev.earlier;
  // Facts: the previous summary's (oldest first), then new ones; a clause already kept elsewhere is not repeated.
  const said = new Set([...doc.goals, ...doc.decisions, ...doc.progress, ...doc.notes].map(dedupeKey));
  doc.facts = timelineOrder(unique([...prev.facts, ...c.facts]).filter((f) => !said.has(dedupeKey(factClause(f)))));

  // Identifiers: the previous summary's first (they already survived a compaction), then new ones.
  const ids = new Map<string, ScoredIdentifier>();
  for (const id of prev.identifiers) {
    if (id.value && !ids.has(id.value)) ids.set(id.value, { ...id, score: KIND_WEIGHT[id.kind] + SURVIVOR_BONUS });
  }
  for (const id of c.identifiers.values()) {
    const seen = ids.get(id.value);
    if (seen) seen.score = Math.max(seen.score, id.score) + 1;
    else ids.set(id.value, { ...id });
  }
  // A bare `name` is dropped when the same name is also known as a function `name()`.
  let list = [...ids.values()].filter((id) => id.kind !== "symbol" || ids.get(`${id.value}()`)?.kind !== "function");
  if (list.length > MAX_IDENTIFIERS) {
    const keep = new Set([...list].sort((a, b) => b.score - a.score).slice(0, MAX_IDENTIFIERS));
    list = list.filter((id) => keep.has(id));
  }
  // Identifiers the goals or the latest request quote are the ones the work is about.
  const pinned = [...doc.goals, doc.latest].join("\n").slice(0, PINNED_SCAN);
  const inErrors = doc.errors.join("\n").slice(0, PINNED_SCAN);
  for (const id of list) {
    if (pinned.includes(id.value)) id.score += PINNED_BONUS;
    else if (inErrors.includes(id.value)) id.score += 1;
  }
  doc.identifiers = list.map(({ kind, value }) => ({ kind, value }));
  return { doc, scores: new Map(list.map((id) => [id.value, id.score])) };
}

/** Whether the summary is of a plain conversation rather than a coding session. */
function isConversation(doc: SummaryDoc): boolean {
  return doc.tools.length === 0 && !doc.identifiers.some((id) => id.kind === "file" || id.kind === "function" || id.kind === "error");
}

/**
 * Facts as budget entries. Like identifiers, the middle of the first-seen order goes first
 * (weighted towards the old side), so the first sessions' facts and the newest ones survive.
 * Within the section's share of the cap, a conversation's facts get a protected tier; in a coding
 * session nothing beyond that share is kept.
 */
function factEntries(doc: SummaryDoc, maxChars: number, focus: (text: string) => number, entries: Entry[]): void {
  const n = doc.facts.length;
  if (n === 0) return;
  const chat = isConversation(doc);
  const share = Math.floor(maxChars * (chat ? FACT_SHARE_CHAT : FACT_SHARE_CODING));
  const names = new SpeakerNames();
  for (const f of doc.facts) names.add(factSpeaker(f));
  const items = doc.facts.map((f, i) => {
    const { date, rest } = splitFact(f);
    const group = date ? dateHeader(date) : undefined;
    const rank = focus(f) + Math.round((factSignal(rest, names) * 100) / (rest.length + 60));
    return { line: `- ${date ? rest : f}`, group, rank, seq: -Math.min(2 * i, n - 1 - i), i };
  });
  const keepOrder = [...items].sort((a, b) => b.rank - a.rank || b.seq - a.seq || b.i - a.i);
  const core = new Set<number>();
  const headed = new Set<string>();
  let used = 0;
  for (const it of keepOrder) {
    // A date header is paid once per date (close enough: runs of one date are contiguous).
    const cost = it.line.length + 1 + (it.group && !headed.has(it.group) ? it.group.length + 1 : 0);
    if (used + cost > share) continue;
    used += cost;
    if (it.group) headed.add(it.group);
    core.add(it.i);
  }
  for (const it of items) {
    if (!core.has(it.i) && !chat) continue;
    const tier = core.has(it.i) && chat ? FACT_CORE_TIER : undefined;
    entries.push({ section: "facts", line: it.line, group: it.group, rank: it.rank, seq: it.seq, tier });
  }
}

function goalRank(goal: string): number {
  if (goal.startsWith("Task: ")) return 100;
  return constraintStrength(goal) * 10;
}

/** The summary as budget entries, in display order, each ranked for dropping. */
function entriesOf(doc: SummaryDoc, scores: ReadonlyMap<string, number>, keywords: readonly string[], maxChars: number): Entry[] {
  const entries: Entry[] = [];
  const focus = (text: string): number => focusMatches(text, keywords) * 5;
  const list = (section: SectionId, items: readonly string[], newestFirstDrop = false, rank = (_: string) => 0): void => {
    items.forEach((item, i) => {
      entries.push({ section, line: `- ${item}`, rank: rank(item) + focus(item), seq: newestFirstDrop ? -i : i });
    });
  };
  if (doc.focus) entries.push({ section: "focus", line: escapeBlock(doc.focus), rank: 0, seq: 0 });
  list("goals", doc.goals, true, goalRank);
  if (doc.latest) entries.push({ section: "latest", line: escapeBlock(doc.latest), rank: 0, seq: 0 });
  list("requests", doc.requests);
  list("decisions", doc.decisions, false, (d) => decisionWeight(d) * 3);
  list("errors", doc.errors);
  // Among equally valuable identifiers the middle of the first-seen order goes first (weighted
  // towards the old side): the oldest ones anchor the original task, the newest the current work.
  const n = doc.identifiers.length;
  doc.identifiers.forEach((id, i) => {
    const line = identifierLine(id);
    entries.push({ section: "identifiers", line, rank: (scores.get(id.value) ?? 0) + focus(id.value), seq: -Math.min(2 * i, n - 1 - i) });
  });
  factEntries(doc, maxChars, focus, entries);
  list("notes", doc.notes);
  list("progress", doc.progress);
  list("tools", doc.tools, false, (t) => (t.endsWith(FAILED) ? 1 : 0));
  doc.earlier.forEach((line, i) => entries.push({ section: "earlier", line: escapeBlock(line), rank: focus(line), seq: -i }));
  return entries;
}
