/**
 * One linear pass over the messages being compacted: picks the user's goals and constraints, the
 * user requests, the assistant's decisions and progress, error lines, tool activity and
 * identifiers, and from every user and assistant message its fact clauses (extract-facts.ts),
 * dated by a {@link MessageClock}. Bulk content (file bodies, long tool output) is scanned for
 * errors and a few paths only, never copied. A transcript turn (`[date] Name: …`: people talking
 * to each other, being replayed) gives facts only: its "must have been fun" is no constraint and
 * its "I'll never forget" no decision.
 */
import { Role, type Message } from "../../contract/gen/contextd/v1/types.js";
import { isSummaryMessage, summaryOf } from "../../contract/messages.js";
import { describeToolCall } from "./extract-tools.js";
import { KIND_WEIGHT, errorMessageOf, errorStrength, extractIdentifiers, extractPaths, type Identifier } from "./extract-identifiers.js";
import { MessageClock } from "./extract-dates.js";
import { factContext, factsOf } from "./extract-facts.js";
import { SpeakerNames } from "./extract-filler.js";
import { clip, focusMatches, oneLine, plainQuotes, sentencesOf, splitText } from "./extract-text.js";

export interface ScoredIdentifier extends Identifier {
  score: number;
}

export interface Collected {
  /** Full text of every user message, oldest first. */
  requests: string[];
  goals: string[];
  decisions: string[];
  progress: string[];
  errors: string[];
  notes: string[];
  /** Fact clauses (dates, names, numbers, places, activities), oldest first, both roles. */
  facts: string[];
  /** Tool activity, oldest first ("name: salient args", "→ failed" when the result was an error). */
  tools: string[];
  identifiers: Map<string, ScoredIdentifier>;
  /** Text of a summary message found among the messages (defensive: callers should not pass one). */
  embeddedSummary: string;
  /**
   * The newest user-side transcript turn (`[date] Name: …`, a conversation between people being
   * replayed): such turns are no requests to an assistant, so they feed Facts, not the
   * requests, goals or decisions; the newest one still stands as the latest user message.
   */
  latestTurn: string;
  /** How many messages were transcript turns. */
  transcriptTurns: number;
}

const STRONG_CONSTRAINT =
  /\b(?:must|mustn't|never|always|don't|do not|doesn't|does not|make sure|ensure|requirements?|required|mandatory|deadline|not allowed|forbidden|under no circumstances|important)\b/i;
const WEAK_CONSTRAINT =
  /\b(?:avoid|only|need to|needs to|should|shouldn't|prefer|instead of|at least|at most|no more than|(?:by|before|until) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|eod|end of))\b/i;
const DECISION =
  /\b(?:I'll|I will|I'm going to|I am going to|we'll|we will|we're going to|we are going to|let's|let us|decided|decide to|decision|chose|choose to|chosen|going to|switch(?:ed|ing)? (?:to|from)|instead of|opt(?:ed|ing)? (?:for|to)|settled on|the plan|will use|the fix is|fix is to|root cause|approach is|rather than|in favou?r of)\b/i;
const PROGRESS =
  /\b(?:fixed|implemented|added|created|updated|removed|deleted|renamed|refactored|migrated|wrote|completed|finished|resolved|succeeded|passing|tests pass|now pass(?:es)?|verified|confirmed|works now|now works|installed|configured|deployed|merged|committed)\b/i;

const NOT_CONSTRAINT =
  /\bmust(?:'ve| have| be| feel)\b|\b(?:so|really|very|super|such an?) important\b|\bimportant (?:to|for) (?:me|us|him|her|them|you)\b|\b(?:never|always) (?:forget|give up|stop|been)\b/gi;

const FIRM_DECISION =
  /\b(?:decided|decision|chose|chosen|choose to|switch(?:ed|ing)? (?:to|from)|instead of|opt(?:ed|ing)? (?:for|to)|settled on|the plan|the fix is|fix is to|root cause|approach is|rather than|in favou?r of|going with|will use)\b/i;

/** 1 for a firm decision ("decided", "instead of", "root cause"…), 0 for a plain "I'll …". */
export function decisionWeight(sentence: string): number {
  return FIRM_DECISION.test(plainQuotes(sentence)) ? 1 : 0;
}

/** 2 = must/never/always/don't…, 1 = should/avoid/only/need to…, 0 = not a constraint. */
export function constraintStrength(sentence: string): 0 | 1 | 2 {
  // "That must have been fun", "it's so important to me": a guess or a feeling, not a constraint.
  const s = plainQuotes(sentence).replace(NOT_CONSTRAINT, " ");
  if (STRONG_CONSTRAINT.test(s)) return 2;
  return WEAK_CONSTRAINT.test(s) ? 1 : 0;
}

const SENTENCE_CAP = 400;
const ERROR_CAP = 300;
/** Tool output bigger than this is scanned at its head and tail only. */
const SCAN_HEAD = 60_000;
const SCAN_TAIL = 20_000;

function textOf(message: Message): string {
  const parts: string[] = [];
  for (const block of message.content) if (block.block?.$case === "text") parts.push(block.block.value.text);
  return parts.join("\n");
}

/** The first text block of a message (where a `[date] Name:` prefix would be), at most 200 characters. */
function firstTextOf(message: Message): string {
  for (const block of message.content) if (block.block?.$case === "text") return block.block.value.text.slice(0, 200);
  return "";
}

/** First two and last two of `items` when there are more than four. */
function ends<T>(items: T[], n = 4): T[] {
  if (items.length <= n) return items;
  const half = Math.ceil(n / 2);
  return [...items.slice(0, half), ...items.slice(items.length - (n - half))];
}

export function collect(messages: readonly Message[], keywords: readonly string[], checkAbort: () => void): Collected {
  const c: Collected = {
    requests: [],
    goals: [],
    decisions: [],
    progress: [],
    errors: [],
    notes: [],
    facts: [],
    tools: [],
    identifiers: new Map(),
    embeddedSummary: "",
    latestTurn: "",
    transcriptTurns: 0,
  };
  const needFocus = Math.min(2, keywords.length);
  const callIndex = new Map<string, number>();

  const addIds = (ids: Iterable<Identifier>, bonus: number): void => {
    for (const id of ids) {
      const score = KIND_WEIGHT[id.kind] + bonus;
      const seen = c.identifiers.get(id.value);
      if (!seen) c.identifiers.set(id.value, { ...id, score });
      else seen.score = Math.max(seen.score, score) + (seen.score < KIND_WEIGHT[seen.kind] + 6 ? 0.5 : 0);
    }
  };
  const note = (sentence: string): void => {
    if (needFocus > 0 && focusMatches(sentence, keywords) >= needFocus) c.notes.push(clip(oneLine(sentence), SENTENCE_CAP));
  };
  /** Error lines of `text` (strong ones; weak ones too when `failed`), at most four per message. */
  const errorLines = (text: string, failed: boolean): string[] => {
    const scan = text.length > SCAN_HEAD + SCAN_TAIL ? `${text.slice(0, SCAN_HEAD)}\n${text.slice(-SCAN_TAIL)}` : text;
    const strong: string[] = [];
    const weak: string[] = [];
    const seen = new Set<string>();
    let first = "";
    for (const raw of scan.split("\n")) {
      const line = raw.trim();
      if (!line || seen.has(line)) continue;
      seen.add(line);
      if (!first) first = line;
      const s = errorStrength(line);
      if (s === 2) strong.push(line);
      else if (s === 1 && failed) weak.push(line);
    }
    if (strong.length > 0) return ends(strong);
    if (!failed) return [];
    return weak.length > 0 ? ends(weak, 2) : first ? [first] : [];
  };

  // Speakers named in `[date] Name:` prefixes: addressing someone is not a fact about a name.
  const names = new SpeakerNames();
  for (const message of messages) {
    if (message.role !== Role.ROLE_USER && message.role !== Role.ROLE_ASSISTANT) continue;
    const { speaker } = factContext(firstTextOf(message));
    if (speaker) names.add(speaker);
  }
  const clock = new MessageClock();

  for (const message of messages) {
    checkAbort();
    if (isSummaryMessage(message)) {
      c.embeddedSummary = summaryOf(message);
      continue;
    }
    switch (message.role) {
      case Role.ROLE_USER: {
        const text = textOf(message).trim();
        if (!text) break;
        const date = clock.dateOf(firstTextOf(message), message.timestampMs);
        c.facts.push(...factsOf(text, names, date, "User"));
        if (factContext(firstTextOf(message)).speaker) {
          c.transcriptTurns++;
          // Its numbers and names stay in its fact clauses, in context; as bare identifiers they would be noise.
          c.latestTurn = text;
          break;
        }
        c.requests.push(text);
        const { prose } = splitText(text);
        for (const line of prose) {
          for (const s of sentencesOf(line)) {
            if (constraintStrength(s) > 0) c.goals.push(clip(oneLine(s), SENTENCE_CAP));
            else note(s);
          }
        }
        const errs = errorLines(text, false);
        for (const e of errs) c.errors.push(`[user] ${clip(e, ERROR_CAP)}`);
        addIds(extractIdentifiers(text, { code: true, numbers: true }), 3);
        addIds(errorIds(errs), 3);
        break;
      }
      case Role.ROLE_ASSISTANT: {
        const full = textOf(message);
        const date = clock.dateOf(firstTextOf(message), message.timestampMs);
        const { prose, code } = splitText(full);
        const hasCalls = message.content.some((b) => b.block?.$case === "toolCall");
        if (!hasCalls) c.facts.push(...factsOf(full, names, date, "Assistant"));
        if (!hasCalls && factContext(firstTextOf(message)).speaker) {
          c.transcriptTurns++;
          break;
        }
        for (const line of prose) {
          for (const raw of sentencesOf(line)) {
            const s = plainQuotes(raw);
            if (s.length < 16 || s.endsWith("?")) continue;
            if (DECISION.test(s)) c.decisions.push(clip(oneLine(raw), SENTENCE_CAP));
            else if (PROGRESS.test(s)) c.progress.push(clip(oneLine(raw), SENTENCE_CAP));
            else note(raw);
          }
        }
        addIds(extractIdentifiers(prose.join("\n"), { code: true, numbers: true }), 1);
        if (code.length > 0) addIds(extractPaths(code.join("\n")), 0);
        for (const block of message.content) {
          if (block.block?.$case !== "toolCall") continue;
          const call = describeToolCall(block.block.value.name, block.block.value.argumentsJson);
          if (block.block.value.id) callIndex.set(block.block.value.id, c.tools.length);
          c.tools.push(call.text);
          addIds(call.ids, 1);
        }
        break;
      }
      case Role.ROLE_TOOL_RESULT: {
        const text = textOf(message);
        const tool = oneLine(message.toolName) || "tool";
        const errs = errorLines(text, message.isError);
        for (const e of errs) c.errors.push(`[${clip(tool, 40)}] ${clip(e, ERROR_CAP)}`);
        addIds(errorIds(errs), 1);
        if (errs.length > 0) addIds(extractPaths(errs.join("\n")), 1);
        // A few paths and URLs from the bulk output, never its content.
        addIds(extractPaths(text.slice(0, 20_000), BULK_PATHS, c.identifiers), 0);
        const at = callIndex.get(message.toolCallId);
        if (message.isError && at !== undefined && !c.tools[at].endsWith(FAILED)) c.tools[at] += FAILED;
        break;
      }
      default:
        break;
    }
  }
  return c;
}

export const FAILED = " → failed";
/** New paths/URLs/tickets taken from one tool result's bulk output. */
const BULK_PATHS = 4;

function errorIds(lines: readonly string[]): Identifier[] {
  const out: Identifier[] = [];
  for (const l of lines) {
    const m = errorMessageOf(l);
    if (m) out.push({ kind: "error", value: m });
  }
  return out;
}
