import { performance } from "node:perf_hooks";
import { setImmediate as nextTurn } from "node:timers/promises";

/**
 * Long synchronous work, cut into slices that give the event loop back in between.
 *
 * Reading a transcript file at the import cap (limits.max_import_bytes) is hundreds of thousands of
 * JSON.parse calls, conversions and token counts: done in one go it holds the event loop for
 * seconds, and every other RPC — health checks included — waits. Work
 * written as {@link Steps} (a generator that yields between small units, e.g. after each line) can
 * run all at once ({@link runAll}, for callers that want a plain function) or a time slice at a
 * time ({@link TimeSlices.run}). It lives in the contract, the lowest layer, because the OpenClaw
 * file readers, the stores' view decoding and the host's compaction all slice their work this way.
 */
export type Steps<T> = Generator<void, T, undefined>;

/** How much work runs before the event loop gets a turn: short enough that a health check is never
 * kept waiting noticeably, long enough that the cost of yielding (one loop turn) stays small. */
export const DEFAULT_SLICE_MS = 10;

/**
 * The slice of work that runs on every call's path (decoding a view, checking a summary): one tenant's
 * large session must not hold the loop for longer than another tenant's whole small Assemble takes
 * (~1.5 ms), or its calls queue behind it.
 */
export const CALL_PATH_SLICE_MS = 2;

/** Runs `steps` to the end without yielding to the event loop. */
export function runAll<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** A budget of event-loop time, renewed after each yield. One per request, shared by its phases. */
export class TimeSlices {
  private started = performance.now();

  constructor(private readonly sliceMs = DEFAULT_SLICE_MS) {}

  /** Whether this slice is used up (cheap: call it after each unit of work). */
  due(): boolean {
    return performance.now() - this.started >= this.sliceMs;
  }

  /**
   * Gives the event loop one turn and starts a new slice. `setImmediate` rather than a timer: it
   * runs after the poll phase, so the sockets that are ready (other calls) are served first, and no
   * minimum delay is added when nothing else waits.
   */
  async yield(): Promise<void> {
    await nextTurn();
    this.started = performance.now();
  }

  /** Yields when the slice is used up; otherwise returns at once. */
  async pause(): Promise<void> {
    if (this.due()) await this.yield();
  }

  /** Runs `steps` to the end, yielding whenever a slice is used up. */
  async run<T>(steps: Steps<T>): Promise<T> {
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
      if (this.due()) await this.yield();
    }
  }
}

/**
 * The lines of `text` as `String.prototype.split(/\r?\n/)` gives them, one at a time (1-based
 * numbers), without building the whole array of a large file first.
 */
export function* eachLine(text: string): Generator<[line: string, n: number], void, undefined> {
  let start = 0;
  let n = 0;
  while (start <= text.length) {
    const newline = text.indexOf("\n", start);
    const end = newline < 0 ? text.length : newline;
    // A "\r" belongs to the separator only before a "\n", as in /\r?\n/.
    const stop = newline > start && text.charCodeAt(newline - 1) === 13 ? newline - 1 : end;
    yield [text.slice(start, stop), ++n];
    start = end + 1;
  }
}
