/**
 * Dates for the extractive summarizer: when a message was said, and relative times in it
 * ("yesterday", "last week", "two days ago", "next month") resolved against that date, so a
 * summary read weeks later still says when things happened.
 *
 * When a message was said — decided per message, first match wins:
 *   1. a date in a bracket that opens its text, `[1:56 pm on 8 May, 2023] Caroline: …` (the form
 *      the LoCoMo bench and transcript replays use): the conversation's own clock, which beats
 *      the timestamp because a replayed or imported conversation is stamped when it was replayed;
 *   2. otherwise, once such a text date has been seen earlier in the same summarize call, that
 *      date (a transcript whose later turns do not repeat it);
 *   3. otherwise `timestamp_ms` when set (> 0; the store stamps every appended message that has
 *      none with the time of the append, so a live conversation is dated by when it happened);
 *   4. otherwise undated: nothing is resolved.
 * All dates are calendar days in UTC (the summary names days, never times of day).
 */

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const MONTH_INDEX = new Map(
  MONTHS.flatMap((m, i) => [[m.toLowerCase(), i] as const, [m.slice(0, 3).toLowerCase(), i] as const, ...(m === "September" ? [["sept", i] as const] : [])]),
);
const WEEKDAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
const WEEKDAY_ABBR = new Map(WEEKDAYS.flatMap((d) => [[d, d] as const, [d.slice(0, 3), d] as const]));
WEEKDAY_ABBR.set("tues", "tuesday").set("thurs", "thursday");

const DMY = /\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?([A-Za-z]{3,9})\.?,? (\d{4})\b/;
const MDY = /\b([A-Za-z]{3,9})\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})\b/;
const ISO = /\b(\d{4})-(\d{2})-(\d{2})\b/;
/** `[<something with a date>] ` at the start of a message. */
const LEAD_BRACKET = /^\[([^\]\n]{4,60})\]\s*/;

const DAY_MS = 86_400_000;

/** The first calendar date written in `text` (8 May, 2023 / May 8th 2023 / 2023-05-08), as UTC midnight. */
export function parseDate(text: string): Date | undefined {
  let m = DMY.exec(text);
  if (m) {
    const month = MONTH_INDEX.get(m[2].toLowerCase());
    if (month !== undefined) return utcDay(Number(m[3]), month, Number(m[1]));
  }
  m = MDY.exec(text);
  if (m) {
    const month = MONTH_INDEX.get(m[1].toLowerCase());
    if (month !== undefined) return utcDay(Number(m[3]), month, Number(m[2]));
  }
  m = ISO.exec(text);
  if (m) return utcDay(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return undefined;
}

function utcDay(year: number, month: number, day: number): Date | undefined {
  if (day < 1 || day > 31 || month < 0 || month > 11) return undefined;
  return new Date(Date.UTC(year, month, day));
}

/** "8 May 2023". */
export function formatDate(d: Date): string {
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

/** "May 2023", `offset` months away from `d`. */
function formatMonth(d: Date, offset: number): string {
  const m = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + offset, 1));
  return `${MONTHS[m.getUTCMonth()]} ${m.getUTCFullYear()}`;
}

/** A leading `[date]` of a message's text: the date and the text after the bracket, if it holds one. */
export function leadingDate(text: string): { date: Date; rest: string } | undefined {
  const t = text.trimStart();
  const b = LEAD_BRACKET.exec(t);
  if (!b) return undefined;
  const date = parseDate(b[1]);
  return date ? { date, rest: t.slice(b[0].length) } : undefined;
}

/** The day of `timestampMs`, or undefined when it is unset (0) or not a plausible time. */
export function dateOfTimestamp(timestampMs: number): Date | undefined {
  if (!Number.isFinite(timestampMs) || timestampMs <= 0) return undefined;
  const d = new Date(Math.floor(timestampMs / DAY_MS) * DAY_MS);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** Applies the rules of the module comment over one summarize call's messages, in order. */
export class MessageClock {
  private textDate: Date | undefined;

  /** The date of a message with this text and timestamp (see the module comment). */
  dateOf(text: string, timestampMs: number): Date | undefined {
    const lead = leadingDate(text);
    if (lead) {
      this.textDate = lead.date;
      return lead.date;
    }
    return this.textDate ?? dateOfTimestamp(timestampMs);
  }
}

const NUMBER_WORDS = new Map("one two three four five six seven eight nine ten eleven twelve".split(" ").map((w, i) => [w, i + 1] as const));
NUMBER_WORDS.set("a", 1).set("an", 1);

function countOf(word: string): number | undefined {
  const w = word.toLowerCase();
  if (/^\d{1,2}$/.test(w)) return Number(w);
  return NUMBER_WORDS.get(w);
}

const DAY_NAMES = "sunday|monday|tuesday|wednesday|thursday|friday|saturday|sun|mon|tues?|wed|thurs?|fri|sat";
const SEASONS = "summer|winter|spring|fall|autumn";
/**
 * Relative times we resolve. One alternation of fixed phrases (no nested quantifiers), matched
 * case-insensitively with the `g` flag.
 */
const RESOLVE = new RegExp(
  "\\b(?:" +
    [
      "yesterday",
      "last night",
      "tomorrow",
      "(?:last|this past|past|next) (?:week|weekend|month|year)",
      "this (?:month|year)",
      `(?:last|this past|next) (?:${SEASONS})`,
      `(?:last|this past|next) (?:${DAY_NAMES})\\b\\.?`,
      "(?:a few|a couple(?: of)?|several|\\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|an?) (?:days?|weeks?|weekends?|months?|years?) ago",
    ].join("|") +
    ")\\b",
  "gi",
);

/** How far one relative phrase points from `date`, in words (undefined: leave it alone). */
function resolveOne(phrase: string, date: Date): string | undefined {
  const p = phrase.toLowerCase().replace(/\.$/, "");
  const on = formatDate(date);
  const year = date.getUTCFullYear();
  if (p === "yesterday" || p === "last night") return formatDate(new Date(date.getTime() - DAY_MS));
  if (p === "tomorrow") return formatDate(new Date(date.getTime() + DAY_MS));
  if (p === "this month") return formatMonth(date, 0);
  if (p === "this year") return String(year);
  const ago = /^(.+) (day|week|weekend|month|year)s? ago$/.exec(p);
  if (ago) {
    const n = countOf(ago[1]);
    const unit = ago[2];
    if (n === undefined) return `${ago[1]} ${unit}s before ${on}`; // "a few weeks ago" → "a few weeks before 8 May 2023"
    if (unit === "day") return formatDate(new Date(date.getTime() - n * DAY_MS));
    if (unit === "month") return formatMonth(date, -n);
    if (unit === "year") return String(year - n);
    return n === 1 ? `the ${unit} before ${on}` : `${ago[1]} ${unit}s before ${on}`;
  }
  const rel = /^(last|this past|past|next) (.+)$/.exec(p);
  if (!rel) return undefined;
  const forward = rel[1] === "next";
  const what = rel[2];
  if (what === "week" || what === "weekend") return `the ${what} ${forward ? "after" : "before"} ${on}`;
  if (what === "month") return formatMonth(date, forward ? 1 : -1);
  if (what === "year") return String(forward ? year + 1 : year - 1);
  const day = WEEKDAY_ABBR.get(what);
  if (day) return `the ${day[0].toUpperCase()}${day.slice(1)} ${forward ? "after" : "before"} ${on}`;
  if (/^(?:summer|winter|spring|fall|autumn)$/.test(what)) {
    // The season's year: "last summer" said in May 2023 is summer 2022, said in October 2023 it is summer 2023.
    const month = date.getUTCMonth();
    const start = what === "spring" ? 2 : what === "summer" ? 5 : what === "winter" ? 11 : 8;
    const y = forward ? (month < start ? year : year + 1) : month > start + 2 ? year : year - 1;
    return `${what} ${y}`;
  }
  return undefined;
}

/**
 * `clause` with relative times resolved against `date`, each resolution in parentheses right after
 * the phrase it resolves ("yesterday (7 May 2023)"); the clause's own words are never changed.
 * At most `limit` phrases per clause are resolved; without a date the clause is returned as is.
 */
export function resolveRelative(clause: string, date: Date | undefined, limit = 3): string {
  if (!date) return clause;
  let done = 0;
  return clause.replace(RESOLVE, (match: string, offset: number, whole: string) => {
    if (done >= limit) return match;
    // Already resolved (a clause carried over from an earlier summary).
    if (whole.startsWith(" (", offset + match.length)) return match;
    const r = resolveOne(match, date);
    if (!r) return match;
    done++;
    return `${match} (${r})`;
  });
}
