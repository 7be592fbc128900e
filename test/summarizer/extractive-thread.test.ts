import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { ExtractiveThread } from "../../dist/src/compaction/summarizer/extractive-thread.js";
import { summarizeExtractive } from "../../dist/src/compaction/summarizer/extractive.js";
import { codingSession } from "../fixtures/coding-session.js";

const thread = new ExtractiveThread();
afterAll(() => thread.close());

describe("the extractive summarizer on its own thread", () => {
  it("writes byte for byte the summary the event loop would have written", async () => {
    for (const [seed, turns] of [
      [1, 40],
      [2, 120],
      [3, 5],
    ]) {
      const { messages } = codingSession({ seed, turns });
      const input = { previousSummary: "", messages, maxChars: 16_000, customInstructions: "focus on the tests" };
      const inline = summarizeExtractive(input);
      expect(await thread.summarize(input)).toBe(inline);
      const again = { ...input, previousSummary: inline, maxChars: 4_000 };
      expect(await thread.summarize(again)).toBe(summarizeExtractive(again));
    }
  });

  it("keeps the event loop answering while it summarizes a large view three times (no stall as long as one summary inline, nor over 50 ms on a quiet machine)", async () => {
    const { messages } = codingSession({ seed: 9, turns: 400 });
    const input = { previousSummary: "", messages, maxChars: 16_000 };
    const started = performance.now();
    summarizeExtractive(input);
    const inlineMs = performance.now() - started;
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    await Promise.all([thread.summarize(input), thread.summarize(input), thread.summarize(input)]);
    delay.disable();
    // The stall the event loop would have had: the summaries' CPU time, inline — three times this.
    // Measured in the same minute, it scales with the machine's load as the loop's delays do (the
    // requests' structured clone is the loop's share); a quiet machine gets the 50 ms bound.
    expect(inlineMs).toBeGreaterThan(50);
    expect(delay.max / 1e6).toBeLessThan(Math.max(50, inlineMs));
  });

  it("answers a caller that has gone at once, with the AbortError the inline summarizer throws", async () => {
    const { messages } = codingSession({ seed: 4, turns: 400 });
    const gone = new AbortController();
    const pending = thread.summarize({ previousSummary: "", messages, maxChars: 16_000, signal: gone.signal });
    gone.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    // The thread goes on serving.
    const small = { previousSummary: "", messages: codingSession({ seed: 5, turns: 3 }).messages, maxChars: 2_000 };
    expect(await thread.summarize(small)).toBe(summarizeExtractive(small));
  });
});
