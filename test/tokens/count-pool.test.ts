/**
 * Token counting on worker threads (src/tokens/count-pool.ts) gives exactly the inline counts, and
 * a thread that dies costs no append (its chunk is counted again on a fresh one). Imported from dist/: a worker thread runs the compiled
 * count-worker.js (vitest runs src/ as TypeScript, which a Node 20 worker cannot load).
 */
import { afterAll, describe, expect, it } from "vitest";
import { TokenCountPool } from "../../dist/src/tokens/count-pool.js";
import { createTokenizer, OFFLOAD_MIN_CHARS } from "../../dist/src/tokens/create-tokenizer.js";
import { messageParts } from "../../dist/src/tokens/message-parts.js";
import { codingSession } from "../fixtures/coding-session.js";

const messages = codingSession({ turns: 12, seed: 5 }).messages;
const inline = createTokenizer("o200k_base");

describe("token counting off the event loop", () => {
  const pool = new TokenCountPool("o200k_base", 2);
  afterAll(() => pool.close());

  it("a thread counts each message's texts exactly as inline counting does", async () => {
    const parts = messages.map((m) => messageParts(m, 1200));
    const counts = await pool.count(
      parts.map((p) => p.texts),
      {},
    );
    expect(counts.map((c, i) => c + parts[i].fixed)).toEqual(messages.map((m) => inline.countMessage(m)));
  });

  it("jobs spread over the threads answer in any order, each with its own counts", async () => {
    const batches = [0, 1, 2, 3, 4, 5].map((k) => messages.slice(k * 5, k * 5 + 20));
    const answers = await Promise.all(
      batches.map((b) =>
        pool.count(
          b.map((m) => messageParts(m, 1200).texts),
          { tenant: `t${b.length}` },
        ),
      ),
    );
    answers.forEach((counts, k) => {
      const parts = batches[k].map((m) => messageParts(m, 1200));
      expect(counts.map((c, i) => c + parts[i].fixed)).toEqual(batches[k].map((m) => inline.countMessage(m)));
    });
  });

  it("a job on a thread that is stopped rejects, and the next job starts a fresh thread", async () => {
    const own = new TokenCountPool("o200k_base", 1);
    const pending = own.count([["x ".repeat(200_000)]]);
    const rejected = expect(pending).rejects.toThrow(/exited|terminated/);
    await own.close();
    await rejected;
    await expect(own.count([["hello world"]])).resolves.toEqual([inline.countText("hello world")]);
    await own.close();
  });

  it("the offloading tokenizer answers a large append with the inline counts, a small one inline", async () => {
    const offloading = createTokenizer("o200k_base", { offload: true });
    const chars = messages.reduce((n, m) => n + messageParts(m, 1200).chars, 0);
    expect(chars).toBeGreaterThan(OFFLOAD_MIN_CHARS);
    expect(await offloading.countMessages(messages)).toEqual(messages.map((m) => inline.countMessage(m)));
    expect(await offloading.countMessages(messages.slice(0, 1))).toEqual([inline.countMessage(messages[0])]);
  });
});
