/**
 * A token-counting thread (count-pool.ts): counts with the main thread's rank table (shared memory,
 * not a copy) and answers each chunk's segments with their counts and where each stopped. Only
 * strings cross the thread boundary.
 */
import { parentPort, workerData } from "node:worker_threads";
import { adoptBpeRanks, bpeSpanCounter, type BpeName } from "./bpe.js";
import type { CountJob, CountAnswer } from "./count-pool.js";

const { name, ranks } = workerData as { name: BpeName; ranks: SharedArrayBuffer };
adoptBpeRanks(name, ranks);
const count = bpeSpanCounter(name);

parentPort!.on("message", (job: CountJob) => {
  let answer: CountAnswer;
  try {
    answer = { id: job.id, results: job.segments.map((s) => count(s.text, s.end, s.limit)) };
  } catch (err) {
    answer = { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(answer);
});
