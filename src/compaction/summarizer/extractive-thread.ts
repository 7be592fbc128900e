/**
 * The extractive summarizer on a thread of its own, beside the event loop. Summarizing what a
 * compaction folds away (a 30k-token view of coding messages) takes the summarizer 100–400 ms of
 * CPU: on the event loop, every tenant's calls waited that long behind one tenant's compaction.
 *
 * One thread, started on first use and not keeping the process alive; jobs run in the order they
 * come (each tenant has at most `limits.tenant.max_calls_running` calls running, so one tenant
 * queues at most that many). The output is the same function's (summarizeExtractive), so it is
 * byte for byte the inline summary. A caller that has gone gets its AbortError at once, and the
 * thread's answer goes nowhere; a thread that fails or exits rejects its jobs and they are
 * summarized inline — a compaction never fails for it — and the next job starts a fresh thread.
 */
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { EXTRACTIVE_KIND, summarizeExtractive } from "./extractive.js";
import type { SummarizeInput, TextSummarizer } from "./summarizer.js";

/** What crosses to the thread: the input without its signal (not cloneable) and its waits. */
export type ExtractiveJob = { id: number } & Pick<SummarizeInput, "previousSummary" | "messages" | "maxChars" | "customInstructions">;
export type ExtractiveAnswer = { id: number; summary: string } | { id: number; error: string };

const WORKER_FILE = fileURLToPath(new URL("./extractive-worker.js", import.meta.url));
/** Like the counting threads: short-lived strings, a small young generation. */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 256 };

interface Pending {
  resolve(summary: string): void;
  reject(err: Error): void;
}

export class ExtractiveThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  /** The extractive summarizer, run on this thread. */
  summarizer(): TextSummarizer {
    return { kind: EXTRACTIVE_KIND, summarize: (input) => this.summarize(input) };
  }

  async summarize(input: SummarizeInput): Promise<string> {
    // Aborted already: the inline summarizer throws its AbortError without doing any work.
    if (input.signal?.aborted) return summarizeExtractive(input);
    const { signal } = input;
    const id = this.nextId++;
    const job: ExtractiveJob = {
      id,
      previousSummary: input.previousSummary,
      messages: input.messages,
      maxChars: input.maxChars,
      customInstructions: input.customInstructions,
    };
    try {
      return await new Promise<string>((resolve, reject) => {
        const gone = () => {
          this.pending.delete(id);
          reject(abortError(signal!));
        };
        signal?.addEventListener("abort", gone, { once: true });
        const done =
          <T>(f: (v: T) => void) =>
          (v: T) => {
            signal?.removeEventListener("abort", gone);
            f(v);
          };
        this.pending.set(id, { resolve: done(resolve), reject: done(reject) });
        this.thread().postMessage(job);
      });
    } catch (err) {
      if (err instanceof ThreadError) return summarizeExtractive(input);
      throw err;
    }
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    await w?.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_FILE, { resourceLimits: WORKER_LIMITS });
    worker.unref();
    worker.on("message", (answer: ExtractiveAnswer) => {
      const job = this.pending.get(answer.id);
      if (!job) return;
      this.pending.delete(answer.id);
      if ("summary" in answer) job.resolve(answer.summary);
      else job.reject(new ThreadError(answer.error));
    });
    const fail = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      const jobs = [...this.pending.values()];
      this.pending.clear();
      for (const job of jobs) job.reject(new ThreadError(err.message));
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`extractive summarizer thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }
}

/** The thread failed (not the summarizer's answer): the job is summarized inline instead. */
class ThreadError extends Error {}

function abortError(signal: AbortSignal): Error {
  const err = new Error("summarization aborted", { cause: signal.reason });
  err.name = "AbortError";
  return err;
}
