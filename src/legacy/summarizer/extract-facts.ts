/**
 * Fact clauses for the extractive summarizer's "Facts" section: short verbatim clauses, from both
 * roles, that carry concrete, answer-like content — dates and times, proper nouns, numbers, places,
 * named activities and events. Built for open-domain conversations (people chatting over many
 * sessions), where goals/decisions/identifiers miss most of what a later question asks about.
 *
 * A message whose text starts with a bracketed date (`[1:56 pm on 8 May, 2023] Caroline: …`) gives
 * its facts that date and speaker as a short prefix (`[8 May 2023] Caroline: …`), and relative
 * times in it are resolved against that date: "yesterday" → "(7 May 2023)", "last week" → "(the
 * week before 8 May 2023)", "last year" → "(2022)". The clause text itself is never paraphrased.
 *
 * Linear in the input: a fixed set of non-backtracking regexes per sentence.
 */
import { clip, oneLine, plainQuotes, sentencesOf, splitText } from "./extract-text.js";

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const MONTH_INDEX = new Map(MONTHS.flatMap((m, i) => [[m.toLowerCase(), i] as const, [m.slice(0, 3).toLowerCase(), i] as const]));

/** Longest fact clause kept (a longer sentence is cut into clauses). */
export const FACT_CAP = 200;
const MIN_FACT = 12;

/** `[<something with a date>] ` at the start of a message. */
const LEAD_BRACKET = /^\[([^\]\n]{4,60})\]\s*/;
/** `Name: ` right after it (one or two capitalized words). */
const LEAD_SPEAKER = /^([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?):\s+/;
const DMY = /\b(\d{1,2})(?:st|nd|rd|th)? ([A-Za-z]{3,9})\.?,? (\d{4})\b/;
const MDY = /\b([A-Za-z]{3,9})\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})\b/;
const ISO = /\b(\d{4})-(\d{2})-(\d{2})\b/;

const MONTH_WORD = /\b(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b/;
const WEEKDAY_WORD = /\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b/;
const YEAR = /\b(?:19|20)\d{2}s?\b/;
const RELATIVE = /\b(?:yesterday|today|tonight|tomorrow|(?:last|next|this|past) (?:week|weekend|month|year|night|summer|winter|spring|fall|autumn|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|\w+ (?:days?|weeks?|months?|years?) ago)\b/i;
const NUMBER = /\b\d+(?:[.,:]\d+)?\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|hundred|thousand|dozen)\b/i;
const ACTIVITY =
  /\b(?:went|visited|joined|attended|started|signed up|took up|bought|adopted|painted|volunteer(?:ed|ing)?|celebrated|moved|travel(?:l)?ed|graduated|married|won|favou?rite|hobby|class(?:es)?|course|workshop|festival|concert|parade|trip|vacation|camping|hiking|running|pottery|museum|conference|competition|group|club|book|movie|game|show|team|job|school|college|studying|reading|playing|learning)\b/i;
/** Sentence-start words and pronouns that are capitalized without being names. */
const NOT_NAMES = new Set(
  ("I I'm I've I'd I'll OK Ok Okay Hey Hi Hello Yes No Oh Wow Thanks Thank Sure Yeah Yep Nope Cool Great Nice Awesome Aww Haha Lol " +
    "The A An And But So Or If When What Who Why How Where Which That This These Those It It's Its My Your Our Their His Her " +
    "We You They He She Me Mr Mrs Ms Dr").split(" "),
);

export interface FactContext {
  /** Session date of the message, when its text starts with one. */
  date?: Date;
  /** "[8 May 2023] Caroline: " or "" — the prefix every fact of the message carries. */
  prefix: string;
  /** Message text without the bracket and speaker prefix. */
  body: string;
  speaker: string;
}

function parseDate(text: string): Date | undefined {
  let m = DMY.exec(text);
  if (m) {
    const month = MONTH_INDEX.get(m[2].toLowerCase());
    if (month !== undefined) return new Date(Date.UTC(Number(m[3]), month, Number(m[1])));
  }
  m = MDY.exec(text);
  if (m) {
    const month = MONTH_INDEX.get(m[1].toLowerCase());
    if (month !== undefined) return new Date(Date.UTC(Number(m[3]), month, Number(m[2])));
  }
  m = ISO.exec(text);
  if (m) return new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return undefined;
}

function formatDate(d: Date): string {
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

function shiftDays(d: Date, days: number): Date {
  return new Date(d.getTime() + days * 86_400_000);
}

/** Splits off a leading `[date] Speaker:` of a message. */
export function factContext(text: string): FactContext {
  let body = text.trimStart();
  let date: Date | undefined;
  const b = LEAD_BRACKET.exec(body);
  if (b) {
    date = parseDate(b[1]);
    if (date) body = body.slice(b[0].length);
  }
  let speaker = "";
  const s = date ? LEAD_SPEAKER.exec(body) : null;
  if (s) {
    speaker = s[1];
    body = body.slice(s[0].length);
  }
  const prefix = date ? `[${formatDate(date)}] ${speaker ? `${speaker}: ` : ""}` : "";
  return { date, prefix, body, speaker };
}

const RESOLVE = /\b(yesterday|last night|tomorrow|last (?:week|weekend|month|year)|next (?:month|year)|last (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b/gi;

/** `clause` with relative times resolved against `date`, each resolution in parentheses after it. */
export function resolveRelative(clause: string, date: Date | undefined): string {
  if (!date) return clause;
  const on = formatDate(date);
  let done = 0;
  return clause.replace(RESOLVE, (match: string) => {
    if (done++ >= 3) return match;
    const m = match.toLowerCase();
    let r: string;
    if (m === "yesterday" || m === "last night") r = formatDate(shiftDays(date, -1));
    else if (m === "tomorrow") r = formatDate(shiftDays(date, 1));
    else if (m === "last week") r = `the week before ${on}`;
    else if (m === "last weekend") r = `the weekend before ${on}`;
    else if (m === "last year") r = String(date.getUTCFullYear() - 1);
    else if (m === "next year") r = String(date.getUTCFullYear() + 1);
    else if (m === "last month" || m === "next month") {
      const d = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + (m === "last month" ? -1 : 1), 1));
      r = `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
    } else {
      const day = m.slice(5);
      r = `the ${day[0].toUpperCase()}${day.slice(1)} before ${on}`;
    }
    return `${match} (${r})`;
  });
}

/** Whether `clause` names someone or something: a capitalized word not at the start of the clause. */
function hasProperNoun(clause: string, skip: ReadonlySet<string>): boolean {
  const words = clause.split(/\s+/);
  for (let i = 1; i < words.length; i++) {
    const prev = words[i - 1];
    const last = prev[prev.length - 1];
    if (last === "." || last === "!" || last === "?" || last === ":") continue;
    const w = words[i].replace(/^["'(“‘]+|[^\p{L}\p{N}'’-]+$/gu, "").replace(/['’]s$/, "");
    if (w.length < 2 || !/^\p{Lu}/u.test(w) || NOT_NAMES.has(w) || skip.has(w)) continue;
    if (/^\p{Lu}[\p{Lu}\d]+$/u.test(w) && w.length > 5) continue; // SHOUTING, not a name
    return true;
  }
  return false;
}

/** How answer-like a clause is: 0 = not a fact. */
export function factSignal(clause: string, skip: ReadonlySet<string>): number {
  let n = 0;
  if (MONTH_WORD.test(clause) || WEEKDAY_WORD.test(clause) || YEAR.test(clause) || RELATIVE.test(clause)) n += 2;
  if (hasProperNoun(clause, skip)) n += 2;
  if (NUMBER.test(clause)) n += 1;
  if (ACTIVITY.test(clause)) n += 1;
  return n;
}

const CLAUSE_SPLIT = /(?:[;:]\s+|,\s+(?=(?:and|but|so|because|which|while|when|since)\b)|\s+[-–—]\s+)/;

/** Clauses of one sentence, each at most FACT_CAP characters. */
function clausesOf(sentence: string): string[] {
  if (sentence.length <= FACT_CAP) return [sentence];
  const out: string[] = [];
  for (const part of sentence.split(CLAUSE_SPLIT)) {
    const t = part.trim();
    if (t) out.push(clip(t, FACT_CAP));
  }
  return out;
}

/**
 * The fact clauses of one message's text (prose only, questions left out), prefixed with the
 * message's date and speaker when it has them. `names` are speakers' names, not counted as proper
 * nouns (addressing someone is not a fact).
 */
export function factsOf(text: string, names: ReadonlySet<string>, limit = 8): string[] {
  const ctx = factContext(text);
  const out: string[] = [];
  const { prose } = splitText(ctx.body.length > 20_000 ? ctx.body.slice(0, 20_000) : ctx.body);
  for (const line of prose) {
    for (const sentence of sentencesOf(line)) {
      const s = plainQuotes(oneLine(sentence));
      if (s.endsWith("?")) continue;
      for (const clause of clausesOf(s)) {
        if (clause.length < MIN_FACT || clause.endsWith("?")) continue;
        if (factSignal(clause, names) < 2) continue;
        out.push(`${ctx.prefix}${resolveRelative(clause, ctx.date)}`);
        if (out.length >= limit) return out;
      }
    }
  }
  return out;
}
