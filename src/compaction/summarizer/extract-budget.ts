/**
 * Fits a summary into its hard character cap. Under pressure, tool activity and progress notes go
 * first; then every section over its share of the cap is trimmed to that share (so a flood of, say,
 * identifiers cannot crowd out everything else); then whole tiers go, least valuable first:
 * earlier requests, focus notes, oldest decisions, oldest errors, the tail of a foreign earlier
 * summary, low-value identifiers, then goals; the latest user request is shortened (head and tail kept) rather than
 * dropped. Within a section, lines matching the focus and higher-ranked lines go last.
 * The result never exceeds `maxChars`.
 */
import { clipHeadTail } from "./extract-text.js";
import { SECTIONS, SUMMARY_TITLE, renderSections, type SectionId } from "./extract-format.js";

/** Drop tiers: lower tiers go first. */
export const TIER = {
  tools: 0,
  progress: 1,
  requests: 2,
  notes: 3,
  facts: 3.5,
  decisions: 4,
  errors: 5,
  earlier: 6,
  identifiers: 7,
  goals: 8,
  latest: 9,
  focus: 10,
} as const satisfies Record<SectionId, number>;

export interface Entry {
  section: SectionId;
  /** The rendered line (block sections: the whole block). */
  line: string;
  /** Higher rank survives longer within a tier. */
  rank: number;
  /** Overrides the section's tier (e.g. the share of facts a conversational summary protects). */
  tier?: number;
  /** Among equal ranks, lower seq is dropped first (use the index for oldest-first, -index for newest-first). */
  seq: number;
  /**
   * A header line ("On 8 May 2023:") shown once before a run of consecutive entries with the same
   * group, as long as one of them is kept; its characters count against the cap like a line's.
   */
  group?: string;
}

/**
 * Under pressure (after tool activity and progress are gone), a section holding more than this
 * share of the cap is trimmed to it, lowest tier first, so no single section crowds out all the
 * others; then the tier order applies.
 */
const SHARE: ReadonlyArray<[SectionId, number]> = [
  ["requests", 0.12],
  ["notes", 0.1],
  ["facts", 0.45],
  ["decisions", 0.2],
  ["errors", 0.2],
  ["earlier", 0.3],
  ["identifiers", 0.4],
  ["goals", 0.35],
];

/** The latest request is never cut below this many characters while anything else can still go. */
const LATEST_FLOOR = 1200;

const tierOf = (e: Entry): number => e.tier ?? TIER[e.section];

const HEADING_COST = new Map(SECTIONS.map((s) => [s.id, 2 + s.heading.length]));

/** For each entry, the index of its run of consecutive same-section, same-group entries (-1 without a group). */
function groupRuns(entries: readonly Entry[]): number[] {
  const out: number[] = [];
  let runs = -1;
  entries.forEach((e, i) => {
    const prev = i > 0 ? entries[i - 1] : undefined;
    if (e.group === undefined) out.push(-1);
    else if (prev && prev.group === e.group && prev.section === e.section) out.push(runs);
    else out.push(++runs);
  });
  return out;
}

/**
 * Renders `entries` (already in display order) into at most `maxChars` characters. `shares`
 * overrides sections' shares of the cap (a conversation's summary is mostly facts).
 */
export function fitToBudget(entries: Entry[], maxChars: number, shares: Partial<Record<SectionId, number>> = {}): string {
  const max = Math.max(0, Math.floor(maxChars));
  const alive = entries.map(() => true);
  const perSection = new Map<SectionId, number>();
  const sectionChars = new Map<SectionId, number>();
  // Runs of consecutive entries sharing a group header: run index per entry (-1: none), live count per run.
  const runOf = groupRuns(entries);
  const runAlive: number[] = [];
  let total = SUMMARY_TITLE.length;
  entries.forEach((e, i) => {
    const n = perSection.get(e.section) ?? 0;
    if (n === 0) total += HEADING_COST.get(e.section) ?? 0;
    let cost = 1 + e.line.length;
    const run = runOf[i];
    if (run >= 0) {
      if (!runAlive[run]) cost += 1 + (e.group ?? "").length;
      runAlive[run] = (runAlive[run] ?? 0) + 1;
    }
    total += cost;
    perSection.set(e.section, n + 1);
    sectionChars.set(e.section, (sectionChars.get(e.section) ?? 0) + cost);
  });

  const drop = (i: number): void => {
    if (!alive[i]) return;
    alive[i] = false;
    const e = entries[i];
    let cost = 1 + e.line.length;
    const run = runOf[i];
    if (run >= 0 && --runAlive[run] === 0) cost += 1 + (e.group ?? "").length;
    total -= cost;
    sectionChars.set(e.section, (sectionChars.get(e.section) ?? 0) - cost);
    const n = (perSection.get(e.section) ?? 1) - 1;
    perSection.set(e.section, n);
    if (n === 0) total -= HEADING_COST.get(e.section) ?? 0;
  };
  const resize = (i: number, line: string): void => {
    total += line.length - entries[i].line.length;
    sectionChars.set(entries[i].section, (sectionChars.get(entries[i].section) ?? 0) + line.length - entries[i].line.length);
    entries[i] = { ...entries[i], line };
  };

  if (total > max) {
    const order = entries
      .map((e, i) => i)
      .filter((i) => entries[i].section !== "latest")
      .sort((a, b) => {
        const ea = entries[a];
        const eb = entries[b];
        return tierOf(ea) - tierOf(eb) || ea.rank - eb.rank || ea.seq - eb.seq || a - b;
      });
    const latest = entries.findIndex((e) => e.section === "latest");
    let next = 0;
    const dropThrough = (tier: number): void => {
      while (total > max && next < order.length && tierOf(entries[order[next]]) <= tier) drop(order[next++]);
    };
    const shrinkLatest = (floor: number): void => {
      if (latest < 0 || total <= max) return;
      const line = entries[latest].line;
      const target = Math.max(floor, line.length - (total - max));
      if (target < line.length) {
        if (target < 40) drop(latest);
        else resize(latest, clipHeadTail(line, target));
      }
    };
    const bySection = new Map<SectionId, number[]>();
    for (const i of order) {
      const list = bySection.get(entries[i].section);
      if (list) list.push(i);
      else bySection.set(entries[i].section, [i]);
    }
    // Tool activity and progress notes go entirely before anything else is touched.
    dropThrough(TIER.progress);
    for (const [section, fixed] of SHARE) {
      const share = shares[section] ?? fixed;
      const list = bySection.get(section) ?? [];
      for (let k = 0; k < list.length && total > max && (sectionChars.get(section) ?? 0) > share * max; k++) drop(list[k]);
    }
    dropThrough(TIER.earlier);
    shrinkLatest(LATEST_FLOOR);
    dropThrough(TIER.goals);
    shrinkLatest(0);
    dropThrough(Number.POSITIVE_INFINITY);
  }

  const lines = new Map<SectionId, string[]>();
  let shownRun = -1;
  entries.forEach((e, i) => {
    if (!alive[i]) return;
    let list = lines.get(e.section);
    if (!list) lines.set(e.section, (list = []));
    if (runOf[i] >= 0 && runOf[i] !== shownRun) {
      shownRun = runOf[i];
      list.push(e.group ?? "");
    }
    list.push(e.line);
  });
  const out = renderSections(lines);
  return out.length <= max ? out : out.slice(0, max);
}
