/**
 * Worker threads that count tokens, so that BPE over what a request brings (an append, an import,
 * an engine's answer, a rewrite) runs beside the event loop instead of on it, and so that the
 * threads are shared fairly between tenants (one agent's backlog never holds another's count).
 *
 * Work is cut into bounded chunks. A job (one `count` call: per message, its texts) is queued under
 * its tenant as segments: a text of at most SEGMENT_CHARS, or a slice of a longer text that starts
 * where one of its BPE pieces starts (bpe.ts `bpeSpanCounter` counts a slice exactly as the whole
 * text would count it, and says where the next slice starts). A chunk is one tenant's segments, at
 * most CHUNK_CHARS of text; the pool keeps at most two chunks on a thread (the one it counts and the
 * next), and takes the next one by deficit round robin over the tenants with work queued, by
 * characters: a tenant with a backlog of megabytes gets a chunk's worth per turn, like any other, so
 * another tenant's count waits for at most two chunks per thread (a few milliseconds) — not for the
 * backlog.
 *
 * One BPE piece cannot be cut (a run of 1 MB of one letter is one piece: ~0.4 s of merging). A
 * slice whose first piece does not fit goes to the long lane — its own thread and queue, by the
 * same rule — with a slice four times longer each time until the piece fits. So the regular threads
 * only ever hold chunks of CHUNK_CHARS, and a long piece delays only other long pieces, one per
 * tenant per turn.
 *
 * A job whose caller has gone (its AbortSignal fires, or its deadline passes) is dropped: its
 * queued segments are discarded and the caller gets CANCELLED / DEADLINE_EXCEEDED; a chunk already
 * on a thread finishes (it is bounded) and its answer is ignored.
 *
 * Threads start on first use and do not keep the process alive. A thread that fails or exits is
 * replaced and its chunk queued again; a chunk that fails twice is counted inline when it is a
 * regular chunk (bounded: CHUNK_CHARS) and fails its jobs otherwise — a long piece is never counted
 * on the event loop.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { CancelledError, ContextdError, DeadlineExceededError, ResourceExhaustedError } from "../contract/errors.js";
import { bpeRanks, bpeSpanCounter, SPAN_MARGIN, type BpeName } from "./bpe.js";

/** The most text one segment of a long text is counted in (plus SPAN_MARGIN of look-ahead). */
export const SEGMENT_CHARS = 16_384;
/** The most text one chunk holds: what a thread counts before the next tenant's turn. */
export const CHUNK_CHARS = SEGMENT_CHARS + SPAN_MARGIN;

/** One slice to count, as a thread gets it. */
export interface CountSegment {
  text: string;
  /** The slice runs to the text's end. */
  end: boolean;
  /** Count the pieces that start before this offset (and fit: bpe.ts `bpeSpanCounter`). */
  limit: number;
}

export interface CountJob {
  id: number;
  segments: CountSegment[];
}

/** Per segment, [count, consumed]. */
export type CountAnswer = { id: number; results: [number, number][] } | { id: number; error: string };

export interface CountOptions {
  /** Who the work is for (runtime token and agent, engine): the unit the pool is fair between. */
  tenant?: string;
  /** Fires when the caller has gone: the job's queued work is dropped and it rejects. */
  signal?: AbortSignal;
  /** The caller's deadline (epoch ms): past it the job is dropped and rejects DEADLINE_EXCEEDED. */
  deadlineMs?: number;
}

/** Totals since start, for the metrics endpoint. */
export interface CountPoolStats {
  /** Characters counted on threads (and inline after a thread failed twice). */
  countedChars: number;
  /** Characters of jobs whose caller had gone, left uncounted (or counted for nothing). */
  droppedChars: number;
  /** Jobs dropped because their caller had gone. */
  droppedJobs: number;
  /** Chunks sent to threads. */
  chunks: number;
  /** Threads that failed or exited and were replaced. */
  threadFailures: number;
  /** Characters of live jobs not counted yet (queued, or on a thread now). */
  pendingChars: number;
}

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
  readonly counts: number[];
  /** Segments queued or on a thread. */
  outstanding = 0;
  /** Characters to count, and counted so far. */
  chars = 0;
  counted = 0;
  settled = false;
  private timer?: NodeJS.Timeout;
  private onAbort?: () => void;

  constructor(
    size: number,
    readonly tenant: string,
    private readonly resolveCounts: (counts: number[]) => void,
    private readonly rejectCounts: (err: Error) => void,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.counts = new Array<number>(size).fill(0);
  }

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

  resolve(): void {
    if (this.settle()) this.resolveCounts(this.counts);
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

/** A slice of one message's text, still to count. */
interface Segment {
  job: Job;
  message: number;
  text: string;
  start: number;
  /** How much of the text from `start` the slice takes. */
  span: number;
}

const segmentChars = (s: Segment) => Math.min(s.span, s.text.length - s.start);

/** A queue with O(1) takes from the front and pushes at either end (an import queues 100k segments). */
class SegmentQueue {
  private items: Segment[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }
  peek(): Segment {
    return this.items[this.head];
  }
  push(s: Segment): void {
    this.items.push(s);
  }
  pushFront(s: Segment): void {
    if (this.head > 0) this.items[--this.head] = s;
    else this.items.unshift(s);
  }
  shift(): Segment {
    const s = this.items[this.head];
    this.items[this.head++] = undefined as unknown as Segment;
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return s;
  }
  /** Removes the segments `drop` says to. */
  remove(drop: (s: Segment) => boolean): void {
    this.items = this.items.slice(this.head).filter((s) => !drop(s));
    this.head = 0;
  }
  all(): Segment[] {
    return this.items.slice(this.head);
  }
}

interface TenantQueue {
  key: string;
  segments: SegmentQueue;
  /** Characters this tenant may still send before its turn ends (deficit round robin). */
  deficit: number;
}

interface Chunk {
  id: number;
  lane: Lane;
  segments: Segment[];
  /** Times a thread failed on it. */
  failures: number;
}

interface Slot {
  worker: Worker;
  /** Chunks sent and not answered, in the order the thread counts them. */
  chunks: Chunk[];
}

/**
 * Chunks a regular thread holds at once: the one it counts and the next, so that it never idles
 * while its answer crosses to the event loop and the next chunk comes back (with one, a busy event
 * loop left the thread waiting: batched appends fell from ~8 000 to ~4 700 messages/s). Another
 * tenant's chunk waits behind at most these.
 */
const REGULAR_DEPTH = 2;

/**
 * Threads and the tenants' queues for one kind of chunk. `quantum`: the characters a tenant gets
 * per turn (and a chunk's most); 0 for one segment per turn.
 */
class Lane {
  readonly slots: Slot[] = [];
  readonly tenants = new Map<string, TenantQueue>();
  /** Tenants with segments queued, in turn order. */
  readonly ring: TenantQueue[] = [];
  private cursor = 0;

  constructor(
    readonly name: "regular" | "long",
    readonly size: number,
    readonly quantum: number,
  ) {}

  enqueue(segment: Segment, front = false): void {
    let queue = this.tenants.get(segment.job.tenant);
    if (!queue) {
      queue = { key: segment.job.tenant, segments: new SegmentQueue(), deficit: 0 };
      this.tenants.set(queue.key, queue);
    }
    if (queue.segments.length === 0) this.ring.push(queue);
    if (front) queue.segments.pushFront(segment);
    else queue.segments.push(segment);
  }

  /** The next tenant's turn: its segments, as many as its deficit allows (at least one). */
  take(): Segment[] | undefined {
    if (this.ring.length === 0) return undefined;
    if (this.cursor >= this.ring.length) this.cursor = 0;
    const queue = this.ring[this.cursor];
    const taken: Segment[] = [];
    if (this.quantum === 0) taken.push(queue.segments.shift());
    else {
      queue.deficit = Math.min(queue.deficit + this.quantum, 2 * this.quantum);
      let chars = 0;
      while (queue.segments.length > 0) {
        const next = segmentChars(queue.segments.peek());
        if (taken.length > 0 && (next > queue.deficit || chars + next > this.quantum)) break;
        taken.push(queue.segments.shift());
        queue.deficit -= next;
        chars += next;
      }
    }
    if (queue.segments.length === 0) {
      queue.deficit = 0;
      this.ring.splice(this.cursor, 1);
      this.tenants.delete(queue.key);
    } else this.cursor++;
    return taken;
  }

  /** Removes `job`'s queued segments. */
  discard(job: Job): void {
    const queue = this.tenants.get(job.tenant);
    if (!queue) return;
    queue.segments.remove((s) => s.job === job);
    if (queue.segments.length === 0) {
      const i = this.ring.indexOf(queue);
      this.ring.splice(i, 1);
      if (i < this.cursor) this.cursor--;
      this.tenants.delete(queue.key);
    }
  }
}

export class TokenCountPool {
  private readonly regular: Lane;
  private readonly long: Lane;
  private nextId = 1;
  private inline?: ReturnType<typeof bpeSpanCounter>;
  private readonly totals: Omit<CountPoolStats, "pendingChars"> = { countedChars: 0, droppedChars: 0, droppedJobs: 0, chunks: 0, threadFailures: 0 };
  private pendingChars = 0;

  constructor(
    private readonly encoding: BpeName,
    size = defaultPoolSize(),
  ) {
    this.regular = new Lane("regular", size, CHUNK_CHARS);
    this.long = new Lane("long", 1, 0);
  }

  /**
   * Counts of each message's texts (summed per message), exactly as counting each text whole.
   * Rejects CANCELLED / DEADLINE_EXCEEDED when the caller went away first.
   */
  count(messages: string[][], options: CountOptions = {}): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
      const job = new Job(messages.length, options.tenant ?? "", resolve, reject, options.signal);
      if (options.signal?.aborted) return job.reject(callerGone(options.signal.reason));
      messages.forEach((texts, message) => {
        for (const text of texts) {
          if (!text) continue;
          job.chars += text.length;
          this.queue({ job, message, text, start: 0, span: CHUNK_CHARS });
        }
      });
      if (job.outstanding === 0) return job.resolve();
      this.pendingChars += job.chars;
      job.watch(options.deadlineMs, (err) => this.drop(job, err));
      this.pump();
    });
  }

  stats(): CountPoolStats {
    return { ...this.totals, pendingChars: this.pendingChars };
  }

  /** Stops every thread; every job not yet answered rejects. */
  async close(): Promise<void> {
    const jobs = new Set<Job>();
    for (const lane of [this.regular, this.long]) {
      for (const q of lane.ring.splice(0)) for (const s of q.segments.all()) jobs.add(s.job);
      lane.tenants.clear();
      for (const slot of lane.slots) for (const c of slot.chunks) for (const s of c.segments) jobs.add(s.job);
    }
    this.pendingChars = 0;
    const slots = [...this.regular.slots.splice(0), ...this.long.slots.splice(0)];
    for (const job of jobs) job.reject(new Error("token counting thread terminated: the pool was closed"));
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private queue(segment: Segment, front = false): void {
    segment.job.outstanding++;
    (segment.span > CHUNK_CHARS ? this.long : this.regular).enqueue(segment, front);
  }

  private drop(job: Job, err: Error): void {
    if (job.settled) return;
    this.regular.discard(job);
    this.long.discard(job);
    this.pendingChars -= job.chars - job.counted;
    this.totals.droppedChars += job.chars - job.counted;
    this.totals.droppedJobs++;
    job.reject(err);
  }

  /** Gives every thread with room (starting threads up to the lane's size) the next tenant's chunk. */
  private pump(): void {
    for (const lane of [this.regular, this.long]) {
      for (;;) {
        if (lane.ring.length === 0) break;
        const slot = this.room(lane);
        if (!slot) break;
        const segments = lane.take()!;
        this.send(slot, { id: this.nextId++, lane, segments, failures: 0 });
      }
    }
  }

  /** The thread to send the lane's next chunk to: an idle one, a new one, or one with room behind its chunk. */
  private room(lane: Lane): Slot | undefined {
    const depth = lane.name === "regular" ? REGULAR_DEPTH : 1;
    let best: Slot | undefined;
    for (const s of lane.slots) if (s.chunks.length < depth && (!best || s.chunks.length < best.chunks.length)) best = s;
    if (best?.chunks.length === 0) return best;
    if (lane.slots.length < lane.size) return this.start(lane);
    return best;
  }

  private send(slot: Slot, chunk: Chunk): void {
    slot.chunks.push(chunk);
    this.totals.chunks++;
    const limit = chunk.lane.name === "long" ? 1 : SEGMENT_CHARS;
    const job: CountJob = {
      id: chunk.id,
      segments: chunk.segments.map((s) => ({ text: s.text.slice(s.start, s.start + s.span), end: s.start + s.span >= s.text.length, limit })),
    };
    slot.worker.postMessage(job);
  }

  /** A chunk's counts: added to their jobs, each unfinished text queued on from where it stopped. */
  private answered(chunk: Chunk, results: [number, number][]): void {
    chunk.segments.forEach((s, i) => {
      const [count, consumed] = results[i];
      const job = s.job;
      job.outstanding--;
      if (job.settled) return;
      this.totals.countedChars += consumed;
      job.counted += consumed;
      this.pendingChars -= consumed;
      job.counts[s.message] += count;
      const start = s.start + consumed;
      // A slice to the text's end is consumed whole (bpeSpanCounter says so); the check only makes
      // sure that a text is never sliced again without end.
      const finished = start >= s.text.length || (consumed === 0 && s.start + s.span >= s.text.length);
      if (!finished) {
        // No piece fitted: the first piece is longer than the slice; try one four times longer.
        const span = consumed === 0 ? s.span * 4 : CHUNK_CHARS;
        this.queue({ ...s, start, span }, true);
        return;
      }
      if (start < s.text.length) {
        job.counted += s.text.length - start;
        this.pendingChars -= s.text.length - start;
      }
      if (job.outstanding === 0) job.resolve();
    });
    this.pump();
  }

  private start(lane: Lane): Slot {
    const worker = new Worker(WORKER_FILE, { workerData: { name: this.encoding, ranks: bpeRanks(this.encoding).buffer }, resourceLimits: WORKER_LIMITS });
    worker.unref();
    const slot: Slot = { worker, chunks: [] };
    worker.on("message", (answer: CountAnswer) => {
      const i = slot.chunks.findIndex((c) => c.id === answer.id);
      if (i < 0) return;
      const [chunk] = slot.chunks.splice(i, 1);
      if ("results" in answer) this.answered(chunk, answer.results);
      else this.failed(chunk, new Error(`token counting thread: ${answer.error}`));
    });
    let gone = false;
    const fail = (err: Error) => {
      if (gone) return;
      gone = true;
      const i = lane.slots.indexOf(slot);
      if (i < 0) return; // closed
      lane.slots.splice(i, 1);
      this.totals.threadFailures++;
      const chunks = slot.chunks.splice(0);
      for (const chunk of chunks) this.failed(chunk, err);
      if (chunks.length === 0) this.pump();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`token counting thread exited (code ${code})`)));
    lane.slots.push(slot);
    return slot;
  }

  /** A chunk whose thread failed: queued again once; then counted inline if bounded, else its jobs fail. */
  private failed(chunk: Chunk, err: Error): void {
    chunk.failures++;
    const live = chunk.segments.filter((s) => !s.job.settled);
    for (const s of chunk.segments) if (s.job.settled) s.job.outstanding--;
    if (chunk.failures < 2) {
      for (const s of live) {
        s.job.outstanding--;
        this.queue(s, true);
      }
      // The failed thread is replaced by pump(): a fresh one starts for the chunk.
      this.pump();
      return;
    }
    if (chunk.lane.name === "regular") {
      this.inline ??= bpeSpanCounter(this.encoding);
      const count = this.inline;
      this.answered(
        { ...chunk, segments: live },
        live.map((s) => count(s.text.slice(s.start, s.start + s.span), s.start + s.span >= s.text.length, SEGMENT_CHARS)),
      );
      return;
    }
    for (const s of live) {
      s.job.outstanding--;
      this.drop(s.job, new ResourceExhaustedError(`token counting failed twice on a piece of over ${s.span / 4} characters (${err.message})`));
    }
    this.pump();
  }
}

/** The error a job whose signal fired rejects with: CANCELLED, or DEADLINE_EXCEEDED for a timeout. */
export function callerGone(reason: unknown): Error {
  if (reason instanceof ContextdError) return reason;
  if (reason instanceof Error && reason.name === "TimeoutError") return new DeadlineExceededError("token counting: the call's deadline passed");
  return new CancelledError("token counting: the caller cancelled the call");
}
