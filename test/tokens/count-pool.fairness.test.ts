/**
 * The counting pool (src/tokens/count-pool.ts) against real worker threads: a long text counted in
 * slices counts exactly what it counts whole; tenants are served by turns of one bounded chunk, so
 * one tenant's backlog does not hold another's count; a job whose caller has gone is dropped.
 * Imported from dist/: a worker thread runs the compiled count-worker.js.
 */
import fc from "fast-check";
import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { status } from "@grpc/grpc-js";
import { TokenCountPool, CHUNK_CHARS } from "../../dist/src/tokens/count-pool.js";
import { bpeCounter, bpeSpanCounter, SPAN_MARGIN } from "../../dist/src/tokens/bpe.js";

const count = bpeCounter("o200k_base");
const span = bpeSpanCounter("o200k_base");

/** Ordinary prose and code, varied enough that most pieces are not cached yet. */
function prose(chars: number, seed: number): string {
  const words = ["the", " function", " return", "(x)", " =>", " {", "}\n", " value", " index", "  ", "\t", " 42", " error", ".", ",", " don't"];
  let s = "";
  let x = seed;
  while (s.length < chars) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += words[x % words.length] + (x % 7 === 0 ? ` id${x % 100000}` : "");
  }
  return s.slice(0, chars);
}

/** Counts `text` in slices of about `size` characters the way the pool does, doubling a slice whose first piece does not fit. */
function countInSlices(text: string, size: number): number {
  let total = 0;
  let start = 0;
  let length = size;
  while (start < text.length) {
    const end = start + length >= text.length;
    const [n, consumed] = span(text.slice(start, start + length), end, Infinity);
    if (consumed === 0 && !end) {
      length *= 2;
      continue;
    }
    total += n;
    start += consumed;
    length = size;
  }
  return total;
}

describe("the token counting pool: exact, fair between tenants, and dropping work whose caller has gone", () => {
  const pool = new TokenCountPool("o200k_base", 1);
  afterAll(() => pool.close());

  it("a text counted in slices that start where a piece starts counts exactly what it counts whole, for every shape", () => {
    const unit = fc.constantFrom(
      " ",
      "   ",
      "\n",
      "\r\n",
      "\t",
      "'s",
      "'re",
      "a",
      "Z",
      "é",
      "日本",
      "🎉",
      "👩‍👩‍👧",
      "1",
      "2345",
      "-",
      "[[",
      "/",
      "x_y",
      ".",
      "ABC",
      "def",
    );
    const runs = fc.array(fc.tuple(unit, fc.integer({ min: 1, max: 300 })), { maxLength: 12 }).map((rs) => rs.map(([u, n]) => u.repeat(n)).join(""));
    fc.assert(
      fc.property(
        fc.oneof(runs, fc.string({ unit: "grapheme", maxLength: 2000 }), fc.string({ unit: "binary", maxLength: 500 })),
        fc.integer({ min: SPAN_MARGIN + 1, max: 400 }),
        (text, size) => {
          expect(countInSlices(text, size)).toBe(count(text));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("the pool's counts of long texts of every adversarial shape are the whole-text counts", async () => {
    const texts = [
      "a".repeat(200_000),
      " ".repeat(70_000) + "x",
      "[[[[".repeat(20_000),
      "漢".repeat(40_000),
      "👩‍👩‍👧".repeat(10_000),
      (" ".repeat(CHUNK_CHARS - 3) + "\n").repeat(5) + "  z're",
      prose(300_000, 1),
    ];
    const counts = await pool.count(
      texts.map((t) => [t, "tail"]),
      { tenant: "shapes" },
    );
    expect(counts).toEqual(texts.map((t) => count(t) + count("tail")));
  });

  it("one tenant's backlog does not delay another tenant's count by more than a chunk's turn", async () => {
    // A backlog of 48 appends of 400 KB: about 1,200 chunks.
    const backlog = Array.from({ length: 48 }, (_, i) => pool.count([[prose(400_000, 100 + i)]], { tenant: "noisy" }));
    const started = performance.now();
    // Another tenant's append of 40 KB, sent while the backlog is queued on the same thread.
    const quiet = await pool.count([[prose(40_000, 7)]], { tenant: "quiet" });
    const quietMs = performance.now() - started;
    const backlogMs = await Promise.all(backlog).then(() => performance.now() - started);
    console.log(`quiet tenant's 40 KB count: ${Math.round(quietMs)} ms; the backlog: ${Math.round(backlogMs)} ms`);
    expect(quiet).toEqual([count(prose(40_000, 7))]);
    // Its 3 chunks, each after at most one of the backlog's: a few ms, against the backlog's hundreds
    // (the ratio is loose: under the whole suite on 2 cores it was 1/10 once).
    expect(quietMs).toBeLessThan(backlogMs / 4);
    expect(quietMs).toBeLessThan(100);
  });

  it("a long piece goes to its own thread: another tenant's ordinary count does not wait for it", async () => {
    const long = pool.count([["a".repeat(2_000_000)]], { tenant: "long" });
    const started = performance.now();
    await pool.count([[prose(20_000, 9)]], { tenant: "ordinary" });
    const ordinaryMs = performance.now() - started;
    const longMs = await long.then(() => performance.now() - started);
    console.log(`ordinary count beside a 2 MB piece: ${Math.round(ordinaryMs)} ms (the piece: ${Math.round(longMs)} ms)`);
    expect(ordinaryMs).toBeLessThan(longMs / 4);
  });

  it("a cancelled job's queued chunks are discarded: it rejects CANCELLED at once and the threads move on", async () => {
    const controller = new AbortController();
    const before = pool.stats();
    const gone = pool.count(
      Array.from({ length: 20 }, (_, i) => [prose(200_000, 300 + i)]),
      { tenant: "gone", signal: controller.signal },
    );
    // Sent to its thread; then the caller goes away.
    await new Promise((r) => setImmediate(r));
    controller.abort();
    await expect(gone).rejects.toMatchObject({ code: status.CANCELLED });
    expect(pool.stats().pendingChars).toBe(0);
    const started = performance.now();
    await pool.count([[prose(20_000, 11)]], { tenant: "next" });
    expect(performance.now() - started).toBeLessThan(500);
    // By the next job's answer its thread has said how much of the 4 MB it had counted: a few chunks.
    const after = pool.stats();
    expect(after.droppedJobs).toBe(before.droppedJobs + 1);
    expect(after.droppedChars - before.droppedChars).toBeGreaterThan(4_000_000 - 8 * CHUNK_CHARS);
    expect(after.countedChars - before.countedChars).toBeLessThan(20_000 + 8 * CHUNK_CHARS);
  });

  it("a job whose deadline passes is dropped and rejects DEADLINE_EXCEEDED", async () => {
    const job = pool.count([[prose(4_000_000, 21)]], { tenant: "late", deadlineMs: Date.now() + 20 });
    await expect(job).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    expect(pool.stats().pendingChars).toBe(0);
  });

  it("a thread that dies under a chunk is replaced and the chunk counted again: the count stays exact", async () => {
    const text = prose(300_000, 31);
    const job = pool.count([[text]], { tenant: "crash" });
    const slots = (pool as unknown as { slots: { worker: { terminate(): Promise<number> }; jobs: Map<number, unknown> }[] }).slots;
    while (!slots[0]?.jobs.size) await new Promise((r) => setImmediate(r));
    const failures = pool.stats().threadFailures;
    await slots[0].worker.terminate();
    expect(await job).toEqual([count(text)]);
    expect(pool.stats().threadFailures).toBe(failures + 1);
  });
});
