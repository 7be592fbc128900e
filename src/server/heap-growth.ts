import v8 from "node:v8";

/**
 * How far V8 lets the old generation grow before its next full collection (`server.heap_growth_percent`).
 *
 * Why contextd sets it: what an append or an Assemble allocates mostly dies young, but whatever is
 * still in flight when a scavenge runs (a batch waiting for its token counts, its group commit and
 * the WAL sync) is promoted, and dies there soon after. Left to its own heuristics, V8 let the old
 * generation grow to about three times what survived the last full collection (24 → 75 MB under
 * the memory bench's appends) before collecting it: ~50 MB of contextd's resident memory was dead
 * objects waiting for a collection. With 100 %, V8 collects at 2× the live heap.
 *
 * Why 100 and not less: the limit also counts the ArrayBuffers that die young — every Assemble's
 * ~25 kB answer is copied into a few of them on its way out (contextd's splice, grpc-js's framing,
 * both hops) — so a tight limit turns what scavenges would free into full collections. At 50 %
 * (round 4's default) the sidecar Assemble ran a mark-compact every ~150 ms at 64 calls in flight,
 * and cost contextd ~20–35 % more CPU per call than at 100 % (issue 14 round 5, alternated runs);
 * the memory bench's peak was 197 MB at 50 % and 204 MB at 100 % (with the 2 MB view cache).
 *
 * The flag is V8's `--heap-growing-percent`, which V8 reads each time it sets the next collection's
 * limit, so setting it at start (before any load) takes effect. 0 leaves V8's own heuristics — and
 * whatever the command line or NODE_OPTIONS set — alone.
 */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
