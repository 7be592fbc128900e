import v8 from "node:v8";

/**
 * How far V8 lets the old generation grow before its next full collection (`server.heap_growth_percent`).
 *
 * Why contextd sets it: what an append or an Assemble allocates mostly dies young, but whatever is
 * still in flight when a scavenge runs (a batch waiting for its token counts, its group commit and
 * the WAL sync) is promoted, and dies there soon after. Left to its own heuristics, V8 let the old
 * generation grow to about three times what survived the last full collection (24 → 75 MB under
 * the memory bench's appends) before collecting it: ~50 MB of contextd's resident memory was dead
 * objects waiting for a collection. With 50 %, V8 collects at 1.5× the live heap: the memory bench's
 * peak went from 245 to 192 MB in one run each (docs/PERFORMANCE.md, issue 14 round 4), for a full
 * collection every second or so under that load — mostly concurrent marking, a few ms on the event
 * loop each.
 *
 * The flag is V8's `--heap-growing-percent`, which V8 reads each time it sets the next collection's
 * limit, so setting it at start (before any load) takes effect. 0 leaves V8's own heuristics — and
 * whatever the command line or NODE_OPTIONS set — alone.
 */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
