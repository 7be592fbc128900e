/**
 * Worker threads that count tokens, so that a large append's BPE work (tens of milliseconds for a
 * batch of 100 coding messages) runs beside the event loop instead of on it: Assemble and every
 * other call keep being answered while appends are counted (bench assemble_under_load).
 *
 * Threads start on first use (a contextd that never sees a large append starts none) and do not
 * keep the process alive. A thread that fails or exits rejects its jobs — the caller then counts
 * inline, so an append never fails for it — and the next job starts a fresh one.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { bpeRanks, type BpeName } from "./bpe.js";

export interface CountJob {
  id: number;
  /** Per message, the texts to count. */
  messages: string[][];
}

export type CountAnswer = { id: number; counts: number[] } | { id: number; error: string };

interface Pending {
  resolve(counts: number[]): void;
  reject(err: Error): void;
  chars: number;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
  /** Characters queued on this thread: new jobs go to the least loaded one. */
  chars: number;
}

/** Threads beside the event loop's own core, at most 4. */
export function defaultPoolSize(): number {
  return Math.max(1, Math.min(4, os.availableParallelism() - 1));
}

const WORKER_FILE = fileURLToPath(new URL("./count-worker.js", import.meta.url));

/**
 * A counting thread makes short-lived strings (its rank table is the main thread's, shared). Left to
 * V8's defaults its heap grew with every append it counted: the memory bench's contextd reached
 * 323 MB RSS after 6 000 sessions (282 MB bounded). A thread that still runs out exits, and its jobs
 * are counted inline (see the class comment).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 };

export class TokenCountPool {
  private readonly slots: Slot[] = [];
  private nextId = 1;

  constructor(
    private readonly encoding: BpeName,
    private readonly size = defaultPoolSize(),
  ) {}

  /** Counts of each message's texts (summed per message). Rejects when the thread failed. */
  count(messages: string[][], chars: number): Promise<number[]> {
    const slot = this.pick();
    const id = this.nextId++;
    return new Promise<number[]>((resolve, reject) => {
      slot.pending.set(id, { resolve, reject, chars });
      slot.chars += chars;
      slot.worker.postMessage({ id, messages } satisfies CountJob);
    });
  }

  /** Stops every thread (their pending jobs reject, and are counted inline by their callers). */
  async close(): Promise<void> {
    await Promise.all(this.slots.splice(0).map((s) => s.worker.terminate()));
  }

  private pick(): Slot {
    if (this.slots.length < this.size) return this.start();
    return this.slots.reduce((best, s) => (s.chars < best.chars ? s : best));
  }

  private start(): Slot {
    const worker = new Worker(WORKER_FILE, { workerData: { name: this.encoding, ranks: bpeRanks(this.encoding).buffer }, resourceLimits: WORKER_LIMITS });
    worker.unref();
    const slot: Slot = { worker, pending: new Map(), chars: 0 };
    worker.on("message", (answer: CountAnswer) => {
      const job = slot.pending.get(answer.id);
      if (!job) return;
      slot.pending.delete(answer.id);
      slot.chars -= job.chars;
      if ("counts" in answer) job.resolve(answer.counts);
      else job.reject(new Error(`token counting thread: ${answer.error}`));
    });
    const fail = (err: Error) => {
      const i = this.slots.indexOf(slot);
      if (i >= 0) this.slots.splice(i, 1);
      for (const job of slot.pending.values()) job.reject(err);
      slot.pending.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`token counting thread exited (code ${code})`)));
    this.slots.push(slot);
    return slot;
  }
}
