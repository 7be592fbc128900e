/**
 * The extractive summarizer's thread (extractive-thread.ts): summarizes each job with the same
 * function the event loop would have used, and answers the summary (or the error's message).
 */
import { parentPort } from "node:worker_threads";
import { summarizeExtractive } from "./extractive.js";
import type { ExtractiveAnswer, ExtractiveJob } from "./extractive-thread.js";

parentPort!.on("message", (job: ExtractiveJob) => {
  let answer: ExtractiveAnswer;
  try {
    answer = { id: job.id, summary: summarizeExtractive(job) };
  } catch (err) {
    answer = { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(answer);
});
