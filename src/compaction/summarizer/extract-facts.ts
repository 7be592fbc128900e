/**
 * Fact clauses for the extractive summarizer's "Facts" section: short verbatim clauses, from both
 * roles, that carry concrete, answer-like content — dates and times, proper nouns, numbers, places,
 * named activities and events. Built for open-domain conversations (people chatting over many
 * sessions), where goals/decisions/identifiers miss most of what a later question asks about.
 *
 * Every fact carries its message's date and speaker as a short prefix (`[8 May 2023] Caroline: …`;
 * the date as extract-dates.ts decides, the speaker from a transcript's `[date] Name:` opening or
 * else the role), and relative times in it are resolved against that date: "yesterday" →
 * "(7 May 2023)", "last week" → "(the week before 8 May 2023)", "last year" → "(2022)". Greetings,
 * thanks, emoji and other small talk are dropped (extract-filler.ts); the clause text itself is
 * never paraphrased. The Facts section renders them grouped by date (extract-timeline.ts).
 *
 * Linear in the input: a fixed set of non-backtracking regexes per sentence.
 */
import { formatDate, leadingDate, resolveRelative } from "./extract-dates.js";
import { isFiller, stripEmoji, stripOpeners, type SpeakerNames } from "./extract-filler.js";
import { clip, oneLine, plainQuotes, sentencesOf, splitText } from "./extract-text.js";

/** Longest fact clause kept (a longer sentence is cut into clauses). */
export const FACT_CAP = 200;
const MIN_FACT = 12;

/** `Name: ` right after a leading `[date]` (one or two capitalized words). */
const LEAD_SPEAKER = /^([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?):\s+/;

const MONTH_WORD =
  /\b(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b/;
const WEEKDAY_WORD = /\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b/;
const YEAR = /\b(?:19|20)\d{2}s?\b/;
const RELATIVE =
  /\b(?:yesterday|today|tonight|tomorrow|(?:last|next|this|past) (?:week|weekend|month|year|night|summer|winter|spring|fall|autumn|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|\w+ (?:days?|weeks?|months?|years?) ago)\b/i;
const NUMBER = /\b\d+(?:[.,:]\d+)?\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|hundred|thousand|dozen)\b/i;
const ACTIVITY =
  /\b(?:went|visited|joined|attended|started|signed up|took up|bought|adopt(?:ed|ing|ion)?|painted|volunteer(?:ed|ing)?|celebrated|moved|travel(?:l)?ed|graduated|married|won|lost|made|met|favou?rite|hobby|class(?:es)?|course|workshop|festival|concert|parade|trip|vacation|camping|hiking|running|riding|swimming|dancing|cooking|baking|writing|pottery|museum|conference|competition|group|club|book|movie|game|show|team|job|school|college|studying|reading|playing|learning|kids?|husband|wife|partner|dog|cat|pets?|birthday|wedding|house|store|business|studio|car)\b/i;
/** The speaker talking about themselves: with one more signal, that is a fact about them. */
const SELF = /\b(?:I|I'm|I've|I'd|I was|we|we're|we've|my|our)\b/;
/** The wordy opening of a shared image's caption, shortened: "[shares a photo: a photo of a cup" → "[photo: a cup". */
const CAPTION_OPENING = /\[shares an? (?:photo|image|picture): (?:an? )?(?:photo|photography|picture|image) of /gi;
/** Sentence-start words and pronouns that are capitalized without being names. */
const NOT_NAMES = new Set(
  (
    "I I'm I've I'd I'll OK Ok Okay Hey Hi Hello Yes No Oh Wow Thanks Thank Sure Yeah Yep Nope Cool Great Nice Awesome Aww Haha Lol " +
    "The A An And But So Or If When What Who Why How Where Which That This These Those It It's Its My Your Our Their His Her " +
    "We You They He She Me Mr Mrs Ms Dr"
  ).split(" "),
);

export interface FactContext {
  /** Session date of the message (see extract-dates.ts for where it comes from). */
  date?: Date;
  /** "[8 May 2023] Caroline: ", "[8 May 2023] User: ", "Caroline: " or "" — the prefix every fact of the message carries. */
  prefix: string;
  /** Message text without the bracket and speaker prefix. */
  body: string;
  /** The `Name:` after a leading `[date]`, or "" (a transcript turn has one). */
  speaker: string;
}

/**
 * Splits off a leading `[date] Speaker:` of a message. `date` is the message's date when already
 * known (from the {@link MessageClock}); `role` ("User", "Assistant") names the speaker of a
 * message that does not name one.
 */
export function factContext(text: string, date?: Date, role = ""): FactContext {
  let body = text.trimStart();
  const lead = leadingDate(body);
  if (lead) {
    date = lead.date;
    body = lead.rest;
  }
  let speaker = "";
  const s = lead ? LEAD_SPEAKER.exec(body) : null;
  if (s) {
    speaker = s[1];
    body = body.slice(s[0].length);
  }
  const who = speaker || role;
  const prefix = (date ? `[${formatDate(date)}] ` : "") + (who ? `${who}: ` : "");
  return { date, prefix, body, speaker };
}

/** The speaker of a held fact ("[8 May 2023] Caroline: …" → "Caroline"), or "". */
export function factSpeaker(fact: string): string {
  const body = leadingDate(fact)?.rest ?? fact;
  const s = LEAD_SPEAKER.exec(body);
  return s && s[1] !== "User" && s[1] !== "Assistant" ? s[1] : "";
}

/** The clause of a held fact, without its date and speaker. */
export function factClause(fact: string): string {
  const body = leadingDate(fact)?.rest ?? fact;
  const s = LEAD_SPEAKER.exec(body);
  return s ? body.slice(s[0].length) : body;
}

/** Whether `clause` names someone or something: a capitalized word not at the start of the clause. */
function hasProperNoun(clause: string, skip: { has(word: string): boolean }): boolean {
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

/**
 * How answer-like a clause is: 0 = not a fact; a clause is kept from 2. Dates and names count
 * most; numbers, activities and the speaker talking about themselves count one each.
 */
export function factSignal(clause: string, skip: { has(word: string): boolean }): number {
  let n = 0;
  if (MONTH_WORD.test(clause) || WEEKDAY_WORD.test(clause) || YEAR.test(clause) || RELATIVE.test(clause)) n += 2;
  if (hasProperNoun(clause, skip)) n += 2;
  if (NUMBER.test(clause)) n += 1;
  if (ACTIVITY.test(clause)) n += 1;
  if (SELF.test(clause)) n += 1;
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
 * The fact clauses of one message's text (prose only, questions and small talk left out), each
 * prefixed with the message's date and speaker (see {@link factContext}); relative times are
 * resolved against the date. `names` are the speakers' names: addressing someone is not a fact.
 */
export function factsOf(text: string, names: SpeakerNames, date?: Date, role = "", limit = 8): string[] {
  const ctx = factContext(text, date, role);
  const out: string[] = [];
  const { prose } = splitText(ctx.body.length > 20_000 ? ctx.body.slice(0, 20_000) : ctx.body);
  for (const line of prose) {
    for (const sentence of sentencesOf(line)) {
      const s = plainQuotes(oneLine(sentence));
      if (s.endsWith("?")) continue;
      for (const raw of clausesOf(s)) {
        const clause = stripOpeners(stripEmoji(raw), names).replace(CAPTION_OPENING, "[photo: ");
        if (clause.length < MIN_FACT || clause.endsWith("?") || isFiller(clause, names)) continue;
        if (factSignal(clause, names) < 2) continue;
        out.push(`${ctx.prefix}${resolveRelative(clause, ctx.date)}`);
        if (out.length >= limit) return out;
      }
    }
  }
  return out;
}
