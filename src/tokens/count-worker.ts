/**
 * A token-counting thread (count-pool.ts), with the main thread's rank table (shared memory, not a
 * copy). A regular thread holds its jobs and schedules them itself: texts cut into segments of at
 * most SEGMENT_CHARS (a long text where one of its BPE pieces starts: bpe.ts `bpeSpanCounter`
 * counts a slice exactly as the whole text would), a chunk of one tenant's segments at a time,
 * tenants by deficit round robin by characters (fair-queue.ts), and between two chunks it reads its
 * messages (new jobs, cancellations). So it never waits for the event loop between chunks, and a
 * new tenant's job waits for at most the chunk being counted. A piece longer than a segment is sent
 * back to be counted on the long thread, and the text goes on from its end once its count comes back.
 *
 * The long thread (`long` in workerData) counts whole pieces, one per message.
 */
import { parentPort, workerData } from "node:worker_threads";
import { adoptBpeRanks, bpePieceCounter, bpePieceEnd, bpeSpanCounter, SPAN_MARGIN, type BpeName } from "./bpe.js";
import type { ToThread, FromThread } from "./count-pool.js";
import { FairQueue } from "./fair-queue.js";

/** The most text one segment is counted in (plus SPAN_MARGIN of look-ahead). */
const SEGMENT_CHARS = 16_384;
const SLICE_CHARS = SEGMENT_CHARS + SPAN_MARGIN;

const { name, ranks, long } = workerData as { name: BpeName; ranks: SharedArrayBuffer; long: boolean };
adoptBpeRanks(name, ranks);
const post = (m: FromThread) => parentPort!.postMessage(m);

interface Job {
  id: number;
  tenant: string;
  counts: number[];
  /** Texts not finished. */
  open: number;
  chars: number;
  counted: number;
  chunks: number;
}

interface Segment {
  job: Job;
  message: number;
  text: string;
  start: number;
}

if (long) {
  const countPiece = bpePieceCounter(name);
  parentPort!.on("message", (m: ToThread) => {
    if (m.type === "piece") post({ type: "piece", ref: m.ref, count: countPiece(m.piece) });
  });
} else {
  const span = bpeSpanCounter(name);
  const pieceEnd = bpePieceEnd(name);
  const jobs = new Map<number, Job>();
  const queue = new FairQueue<Segment>(SLICE_CHARS, (s) => Math.min(SLICE_CHARS, s.text.length - s.start));
  /** Segments whose long piece is being counted elsewhere, by job. */
  const away = new Map<number, Map<number, Segment>>();
  let scheduled = false;
  let nextRef = 1;

  const finish = (job: Job) => {
    jobs.delete(job.id);
    away.delete(job.id);
    post({ type: "done", id: job.id, counts: job.counts, chunks: job.chunks });
  };
  const schedule = () => {
    if (scheduled || queue.empty) return;
    scheduled = true;
    setImmediate(run);
  };
  /** One chunk, then back to the event loop (messages), then the next. */
  const run = () => {
    scheduled = false;
    const chunk = queue.take();
    if (chunk.length > 0) chunk[0].job.chunks++;
    for (const s of chunk) {
      const { job } = s;
      const end = s.start + SLICE_CHARS >= s.text.length;
      const [count, consumed] = span(s.text.slice(s.start, s.start + SLICE_CHARS), end, SEGMENT_CHARS);
      job.counts[s.message] += count;
      job.counted += consumed;
      const start = s.start + consumed;
      if (start >= s.text.length || (consumed === 0 && end)) {
        if (--job.open === 0) finish(job);
      } else if (consumed > 0) queue.push(job.tenant, { ...s, start }, true);
      else {
        // The piece at `start` is longer than a segment: counted on the long thread.
        const stop = pieceEnd(s.text, start);
        const ref = nextRef++;
        let refs = away.get(job.id);
        if (!refs) away.set(job.id, (refs = new Map()));
        refs.set(ref, { ...s, start: stop });
        job.counted += stop - start;
        post({ type: "long", id: job.id, ref, piece: s.text.slice(start, stop) });
      }
    }
    schedule();
  };

  parentPort!.on("message", (m: ToThread) => {
    switch (m.type) {
      case "job": {
        const job: Job = { id: m.id, tenant: m.tenant, counts: new Array<number>(m.messages).fill(0), open: 0, chars: 0, counted: 0, chunks: 0 };
        jobs.set(job.id, job);
        for (const [message, text] of m.texts) {
          if (!text) continue;
          job.open++;
          job.chars += text.length;
          queue.push(job.tenant, { job, message, text, start: 0 });
        }
        if (job.open === 0) finish(job);
        break;
      }
      case "counted": {
        // A long piece's count: the text goes on from the piece's end.
        const job = jobs.get(m.id);
        const s = away.get(m.id)?.get(m.ref);
        if (!job || !s) break;
        away.get(m.id)!.delete(m.ref);
        job.counts[s.message] += m.count;
        if (s.start >= s.text.length) {
          if (--job.open === 0) finish(job);
        } else queue.push(job.tenant, s, true);
        break;
      }
      case "cancel": {
        const job = jobs.get(m.id);
        if (!job) break;
        jobs.delete(m.id);
        away.delete(m.id);
        queue.remove(job.tenant, (s) => s.job === job);
        post({ type: "cancelled", id: job.id, uncounted: job.chars - job.counted, chunks: job.chunks });
        break;
      }
    }
    schedule();
  });
}
