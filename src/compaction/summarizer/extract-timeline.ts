/**
 * The Facts section as a timeline: facts are held as `[8 May 2023] Caroline: I went to …` (see
 * extract-facts.ts) and rendered grouped by date, so the date is written once per day instead of
 * once per fact and a model reads who did what when at a glance:
 *
 *   ## Facts
 *   On 8 May 2023:
 *   - Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.
 *   - Melanie: I painted that lake sunrise last year (2022)!
 *   On 25 May 2023:
 *   - Melanie: I ran a charity race for mental health last Saturday (the Saturday before 25 May 2023).
 *
 * Facts without a date are listed first, without a header. The parser turns the rendered form
 * back into the held one, so facts merge across compactions like every other section; a summary
 * written before the timeline (one `- [date] …` line per fact) parses as well.
 */

/** `[date] ` at the start of a held fact. */
const FACT_DATE = /^\[([^\]\n]{4,40})\] /;
/** A rendered date header. */
const HEADER = /^On ([^:\n]{4,40}):$/;

export interface TimelineFact {
  /** "8 May 2023", or "" for an undated fact. */
  date: string;
  /** The fact without its date: "Caroline: I went to …". */
  rest: string;
}

/** Splits a held fact into its date and the rest. */
export function splitFact(fact: string): TimelineFact {
  const m = FACT_DATE.exec(fact);
  return m ? { date: m[1], rest: fact.slice(m[0].length) } : { date: "", rest: fact };
}

/** The header line of a date group. */
export function dateHeader(date: string): string {
  return `On ${date}:`;
}

/** Rendered lines of held facts (already in timeline order): a header before each run of one date. */
export function renderTimeline(facts: readonly string[]): string[] {
  const out: string[] = [];
  let shown: string | undefined;
  for (const fact of facts) {
    const { date, rest } = splitFact(fact);
    if (date && date !== shown) out.push(dateHeader(date));
    shown = date || shown;
    out.push(`- ${date ? rest : fact}`);
  }
  return out;
}

/**
 * Facts in timeline order: undated first, then the dated ones in the order they were said (a
 * conversation's own order; two runs of the same date, should it go back in time, get a header
 * each). Undated facts go first because a fact after a header would read back with its date.
 */
export function timelineOrder(facts: readonly string[]): string[] {
  const undated: string[] = [];
  const dated: string[] = [];
  for (const f of facts) (FACT_DATE.test(f) ? dated : undated).push(f);
  return undated.length === 0 ? [...dated] : [...undated, ...dated];
}

/** Reads rendered Facts lines back: header lines set the date of the items that follow them. */
export class TimelineParser {
  private date = "";

  /** The held fact for one line of the section, or undefined when the line is a header. */
  line(trimmed: string): { header: true } | { header: false; item: string } {
    const h = HEADER.exec(trimmed);
    if (h) {
      this.date = h[1];
      return { header: true };
    }
    const item = trimmed.startsWith("- ") ? trimmed.slice(2).trim() : trimmed;
    if (!this.date || FACT_DATE.test(item)) return { header: false, item };
    return { header: false, item: `[${this.date}] ${item}` };
  }
}
