/**
 * A token-counting thread (count-pool.ts): loads one BPE encoding and answers jobs of texts with
 * their counts. Only strings cross the thread boundary.
 */
import { parentPort, workerData } from "node:worker_threads";
import { bpeCounter } from "./bpe.js";
import type { CountJob, CountAnswer } from "./count-pool.js";

const count = bpeCounter((workerData as { name: "o200k_base" | "cl100k_base" }).name);

parentPort!.on("message", (job: CountJob) => {
  let answer: CountAnswer;
  try {
    answer = { id: job.id, counts: job.messages.map((texts) => texts.reduce((n, t) => n + count(t), 0)) };
  } catch (err) {
    answer = { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(answer);
});
