/**
 * Worker threads that count tokens, so that BPE over what a request brings (an append, an import,
 * an engine's answer, a rewrite) runs beside the event loop instead of on it, and so that the
 * threads are shared fairly between tenants (one agent's backlog never holds another's count).
 *
 * A job (one `count` call: per message, its texts) goes whole to one regular thread (the one with
 * the fewest characters to count), which schedules its jobs itself (count-worker.ts): texts cut into
 * segments of at most 16 KiB (a long text where one of its BPE pieces starts, so counts stay exact),
 * a chunk of one tenant's segments at a time, tenants by deficit round robin by characters. Between
 * two chunks the thread reads its messages, so a new tenant's job waits for the chunk being counted
 * (a few milliseconds), not for another tenant's backlog — and the thread never waits for the event
 * loop between chunks.
 *
 * One BPE piece cannot be cut (a run of 1 MB of one letter is one piece: ~0.4 s of merging). A piece
 * longer than a segment is counted on the long thread — its own thread, pieces taken here one per
 * tenant per turn — so it delays only other long pieces, and its text goes on from the piece's end.
 *
 * A job whose caller has gone (its AbortSignal fires, or its deadline passes) is dropped: its thread
 * discards what it has not counted, its long pieces not yet counted are discarded here, and the
 * caller gets CANCELLED / DEADLINE_EXCEEDED at once.
 *
 * Threads start on first use and do not keep the process alive. A thread that fails or exits is
 * replaced and its jobs sent again, once; a job that fails twice rejects (RESOURCE_EXHAUSTED) — it
 * is never counted on the event loop instead.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { CancelledError, ContextdError, DeadlineExceededError, ResourceExhaustedError } from "../contract/errors.js";
import { bpeRanks, type BpeName } from "./bpe.js";
import { FairQueue } from "./fair-queue.js";
import type { CountOptions, CountPoolStats } from "./tokenizer.js";

/** The most text a thread counts before it looks at its messages and the next tenant's turn. */
export const CHUNK_CHARS = 16_384;

/** Messages to a counting thread. */
export type ToThread =
  | { type: "job"; id: number; tenant: string; messages: number; texts: [message: number, text: string][] }
  | { type: "cancel"; id: number }
  /** A long piece's count, for the thread that sent it. */
  | { type: "counted"; id: number; ref: number; count: number }
  /** To the long thread: one piece to count. */
  | { type: "piece"; ref: number; piece: string };

/** Messages from a counting thread. */
export type FromThread =
  | { type: "done"; id: number; counts: number[]; chunks: number }
  | { type: "cancelled"; id: number; uncounted: number; chunks: number }
  /** A piece longer than a segment, to count on the long thread. */
  | { type: "long"; id: number; ref: number; piece: string }
  /** From the long thread: a piece's count. */
  | { type: "piece"; ref: number; count: number };

/** Threads beside the event loop's own core, at most 4. */
export function defaultPoolSize(): number {
  return Math.max(1, Math.min(4, os.availableParallelism() - 1));
}

const WORKER_FILE = fileURLToPath(new URL("./count-worker.js", import.meta.url));

/**
 * A counting thread makes short-lived strings (its rank table is the main thread's, shared). Left to
 * V8's defaults its heap grew with every append it counted: the memory bench's contextd reached
 * 323 MB RSS after 6 000 sessions (282 MB bounded). A thread that still runs out exits, and is
 * replaced (see the file comment).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 };

class Job {
  settled = false;
  /** Threads that failed under it. */
  failures = 0;
  slot?: Slot;
  private timer?: NodeJS.Timeout;
  private onAbort?: () => void;

  constructor(
    readonly id: number,
    readonly tenant: string,
    readonly messages: number,
    readonly texts: [number, string][],
    readonly chars: number,
    private readonly resolveCounts: (counts: number[]) => void,
    private readonly rejectCounts: (err: Error) => void,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** Calls `drop` when the caller goes away or the deadline passes. */
  watch(deadlineMs: number | undefined, drop: (err: Error) => void): void {
    if (this.signal) {
      this.onAbort = () => drop(callerGone(this.signal!.reason));
      this.signal.addEventListener("abort", this.onAbort, { once: true });
    }
    if (deadlineMs !== undefined && Number.isFinite(deadlineMs)) {
      this.timer = setTimeout(() => drop(new DeadlineExceededError("token counting: the call's deadline passed")), Math.max(0, deadlineMs - Date.now()));
      this.timer.unref();
    }
  }

  resolve(counts: number[]): void {
    if (this.settle()) this.resolveCounts(counts);
  }

  reject(err: Error): void {
    if (this.settle()) this.rejectCounts(err);
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.onAbort) this.signal!.removeEventListener("abort", this.onAbort);
    return true;
  }
}

interface Slot {
  worker: Worker;
  /** Jobs sent to it and not answered. */
  jobs: Map<number, Job>;
  /** Their characters. */
  chars: number;
  gone: boolean;
}

/** A piece a regular thread sent back, to count on the long thread. */
interface LongPiece {
  job: Job;
  slot: Slot;
  ref: number;
  piece: string;
  failures: number;
}

export class TokenCountPool {
  private readonly slots: Slot[] = [];
  private long?: Slot;
  private readonly longQueue = new FairQueue<LongPiece>(0, (p) => p.piece.length);
  private longInFlight?: LongPiece;
  private nextId = 1;
  /** Jobs dropped whose thread has not said yet how much of them it had counted: their characters. */
  private readonly cancelling = new Map<number, number>();
  private readonly totals: Omit<CountPoolStats, "pendingChars"> = { countedChars: 0, droppedChars: 0, droppedJobs: 0, chunks: 0, threadFailures: 0 };
  private pendingChars = 0;

  constructor(
    private readonly encoding: BpeName,
    private readonly size = defaultPoolSize(),
  ) {}

  /**
   * Counts of each message's texts (summed per message), exactly as counting each text whole.
   * Rejects CANCELLED / DEADLINE_EXCEEDED when the caller went away first.
   */
  count(messages: string[][], options: CountOptions = {}): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
      if (options.signal?.aborted) return reject(callerGone(options.signal.reason));
      const texts: [number, string][] = [];
      let chars = 0;
      messages.forEach((ts, message) => {
        for (const t of ts) {
          if (!t) continue;
          texts.push([message, t]);
          chars += t.length;
        }
      });
      if (chars === 0) return resolve(new Array<number>(messages.length).fill(0));
      const job = new Job(this.nextId++, options.tenant ?? "", messages.length, texts, chars, resolve, reject, options.signal);
      this.pendingChars += chars;
      job.watch(options.deadlineMs, (err) => this.drop(job, err));
      this.assign(job);
    });
  }

  stats(): CountPoolStats {
    return { ...this.totals, pendingChars: this.pendingChars };
  }

  /** Stops every thread; every job not yet answered rejects. */
  async close(): Promise<void> {
    const slots = this.slots.splice(0);
    if (this.long) slots.push(this.long);
    this.long = undefined;
    this.longQueue.clear();
    this.longInFlight = undefined;
    this.cancelling.clear();
    this.pendingChars = 0;
    for (const slot of slots) {
      slot.gone = true;
      for (const job of slot.jobs.values()) job.reject(new Error("token counting thread terminated: the pool was closed"));
      slot.jobs.clear();
    }
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  /** Sends `job` to the regular thread with the fewest characters to count (a new one while there is room). */
  private assign(job: Job): void {
    let slot = this.slots.reduce<Slot | undefined>((best, s) => (!best || s.chars < best.chars ? s : best), undefined);
    if (!slot || (slot.chars > 0 && this.slots.length < this.size)) slot = this.start(false);
    job.slot = slot;
    slot.jobs.set(job.id, job);
    slot.chars += job.chars;
    this.post(slot, { type: "job", id: job.id, tenant: job.tenant, messages: job.messages, texts: job.texts });
  }

  private drop(job: Job, err: Error): void {
    if (job.settled) return;
    job.reject(err);
    this.pendingChars -= job.chars;
    this.totals.droppedJobs++;
    this.totals.droppedChars += job.chars;
    this.longQueue.remove(job.tenant, (p) => p.job === job);
    const slot = job.slot;
    if (slot && slot.jobs.delete(job.id)) {
      slot.chars -= job.chars;
      this.cancelling.set(job.id, job.chars);
      this.post(slot, { type: "cancel", id: job.id });
    }
  }

  private post(slot: Slot, message: ToThread): void {
    slot.worker.postMessage(message);
  }

  private received(slot: Slot, m: FromThread): void {
    switch (m.type) {
      case "done": {
        this.totals.chunks += m.chunks;
        const job = slot.jobs.get(m.id);
        if (!job) {
          // Dropped, but its thread had finished it: it was counted after all.
          const chars = this.cancelling.get(m.id);
          if (chars !== undefined) this.moveDropped(m.id, chars);
          return;
        }
        slot.jobs.delete(m.id);
        slot.chars -= job.chars;
        this.pendingChars -= job.chars;
        this.totals.countedChars += job.chars;
        job.resolve(m.counts);
        return;
      }
      case "cancelled": {
        this.totals.chunks += m.chunks;
        const chars = this.cancelling.get(m.id);
        if (chars !== undefined) this.moveDropped(m.id, chars - m.uncounted);
        return;
      }
      case "long": {
        const job = slot.jobs.get(m.id);
        if (!job) return;
        this.longQueue.push(job.tenant, { job, slot, ref: m.ref, piece: m.piece, failures: 0 });
        this.pumpLong();
        return;
      }
      case "piece": {
        const done = this.longInFlight;
        this.longInFlight = undefined;
        if (done && !done.job.settled && !done.slot.gone && done.slot.jobs.has(done.job.id)) {
          this.post(done.slot, { type: "counted", id: done.job.id, ref: done.ref, count: m.count });
        }
        this.pumpLong();
        return;
      }
    }
  }

  /** A dropped job's characters its thread had counted: counted, not dropped. */
  private moveDropped(id: number, counted: number): void {
    this.cancelling.delete(id);
    this.totals.droppedChars -= counted;
    this.totals.countedChars += counted;
  }

  /** The next tenant's long piece to the long thread, when it is free. */
  private pumpLong(): void {
    if (this.longInFlight || this.longQueue.empty) return;
    const [piece] = this.longQueue.take();
    this.longInFlight = piece;
    this.long ??= this.start(true);
    this.post(this.long, { type: "piece", ref: piece.ref, piece: piece.piece });
  }

  private start(long: boolean): Slot {
    const worker = new Worker(WORKER_FILE, {
      workerData: { name: this.encoding, ranks: bpeRanks(this.encoding).buffer, long },
      resourceLimits: WORKER_LIMITS,
    });
    worker.unref();
    const slot: Slot = { worker, jobs: new Map(), chars: 0, gone: false };
    worker.on("message", (m: FromThread) => {
      if (!slot.gone) this.received(slot, m);
    });
    const fail = (err: Error) => {
      if (slot.gone) return;
      slot.gone = true;
      this.totals.threadFailures++;
      if (long) this.longFailed(slot, err);
      else this.regularFailed(slot, err);
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`token counting thread exited (code ${code})`)));
    if (!long) this.slots.push(slot);
    return slot;
  }

  /** A regular thread's jobs go to a fresh thread, once; a job that fails twice rejects. */
  private regularFailed(slot: Slot, err: Error): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    const jobs = [...slot.jobs.values()];
    slot.jobs.clear();
    for (const job of jobs) {
      this.longQueue.remove(job.tenant, (p) => p.job === job);
      if (++job.failures < 2) this.assign(job);
      else this.fail(job, err);
    }
  }

  /** The long thread's piece is counted again on a fresh one, once; then its job rejects. */
  private longFailed(slot: Slot, err: Error): void {
    if (this.long === slot) this.long = undefined;
    const piece = this.longInFlight;
    this.longInFlight = undefined;
    if (piece && !piece.job.settled) {
      if (++piece.failures < 2) this.longQueue.push(piece.job.tenant, piece, true);
      else this.fail(piece.job, err, piece.piece.length);
    }
    this.pumpLong();
  }

  private fail(job: Job, err: Error, piece?: number): void {
    if (job.settled) return;
    const what = piece === undefined ? `a job of ${job.chars} characters` : `a piece of ${piece} characters`;
    job.reject(new ResourceExhaustedError(`token counting failed twice on ${what} (${err.message})`));
    this.pendingChars -= job.chars;
    this.longQueue.remove(job.tenant, (p) => p.job === job);
    const slot = job.slot;
    if (slot && !slot.gone && slot.jobs.delete(job.id)) {
      slot.chars -= job.chars;
      this.post(slot, { type: "cancel", id: job.id });
    }
  }
}

/** The error a job whose signal fired rejects with: CANCELLED, or DEADLINE_EXCEEDED for a timeout. */
export function callerGone(reason: unknown): Error {
  if (reason instanceof ContextdError) return reason;
  if (reason instanceof Error && reason.name === "TimeoutError") return new DeadlineExceededError("token counting: the call's deadline passed");
  return new CancelledError("token counting: the caller cancelled the call");
}
