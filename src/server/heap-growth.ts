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
 * Why 100 and not less: at 50 % the sidecar Assemble at 16 calls in flight ran
 * a full mark-compact every ~150 ms (`--trace-gc`), although the old space hardly grew between them
 * (21 → 22.5 MB) — what grew was the young generation and short-lived ArrayBuffers (every answer's
 * ~25 kB passes through several: contextd's splice, grpc-js's framing, on both hops) — and contextd
 * spent ~20–35 % more CPU per call than at 100 % (alternated bench runs). The memory
 * bench's peak was 197 MB at 50 % and 204 MB at 100 % (with the 2 MB view cache).
 *
 * The flag is V8's `--heap-growing-percent`, which V8 reads each time it sets the next collection's
 * limit, so setting it at start (before any load) takes effect. 0 leaves V8's own heuristics — and
 * whatever the command line or NODE_OPTIONS set — alone.
 */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
