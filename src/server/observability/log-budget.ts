/**
 * At most `perSecond` log lines per key and second; the next line a key logs after a second in which
 * some were held back says how many (`suppressed`).
 *
 * One line per refused call is what an operator wants while refusals are rare, and an amplifier when
 * they are not: a tenant retrying its RESOURCE_EXHAUSTED calls at once made ~300 refusals a second,
 * each a synchronous write to stdout on the event loop every other tenant's calls share. The budget
 * keeps the first lines of a storm (with their request ids) and counts the rest.
 */
export class LogBudget {
  private readonly windows = new Map<string, { startedMs: number; logged: number; suppressed: number }>();

  constructor(
    private readonly perSecond = 10,
    private readonly now: () => number = () => performance.now(),
    /** Keys are method × status code: a bound on the map, should a caller pass anything else. */
    private readonly maxKeys = 4096,
  ) {}

  /** Whether a line for `key` may be written now, and how many were held back since the last one. */
  take(key: string): { log: boolean; suppressed: number } {
    const t = this.now();
    let w = this.windows.get(key);
    if (!w) {
      if (this.windows.size >= this.maxKeys) this.windows.clear();
      this.windows.set(key, (w = { startedMs: t, logged: 0, suppressed: 0 }));
    }
    if (t - w.startedMs >= 1000) {
      w.startedMs = t;
      w.logged = 0;
    }
    if (w.logged >= this.perSecond) {
      w.suppressed++;
      return { log: false, suppressed: 0 };
    }
    w.logged++;
    const suppressed = w.suppressed;
    w.suppressed = 0;
    return { log: true, suppressed };
  }
}
