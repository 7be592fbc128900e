/**
 * A token-counting thread (count-pool.ts): counts with the main thread's rank table (shared memory,
 * not a copy) and answers jobs of texts with their counts. Only strings cross the thread boundary.
 */
import { parentPort, workerData } from "node:worker_threads";
import { adoptBpeRanks, bpeCounter, type BpeName } from "./bpe.js";
import type { CountJob, CountAnswer } from "./count-pool.js";

const { name, ranks } = workerData as { name: BpeName; ranks: SharedArrayBuffer };
adoptBpeRanks(name, ranks);
const count = bpeCounter(name);

parentPort!.on("message", (job: CountJob) => {
  let answer: CountAnswer;
  try {
    answer = { id: job.id, counts: job.messages.map((texts) => texts.reduce((n, t) => n + count(t), 0)) };
  } catch (err) {
    answer = { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(answer);
});
