import { afterAll, describe, expect, it } from "vitest";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

describe("kill -9 during appends", () => {
  const started: ContextdProcess[] = [];
  afterAll(async () => {
    for (const p of started) await p.cleanup();
  });

  it("every acknowledged message is there after a restart", async () => {
    const first = await startContextd();
    started.push(first);
    const cx = new ContextdClient({ address: first.address, timeoutMs: 10_000 });
    const acknowledged = new Map<string, string[]>();
    let stop = false;

    // Four writers append small batches as fast as they can until the process dies under them.
    const writer = async (w: number) => {
      const sessionId = `durable-${w}`;
      acknowledged.set(sessionId, []);
      for (let i = 0; !stop; i++) {
        const texts = [`w${w} batch ${i} a`, `w${w} batch ${i} b`];
        try {
          await cx.appendMessages({ session: { sessionId }, messages: texts.map((t) => user(t)) });
          acknowledged.get(sessionId)!.push(...texts);
        } catch {
          return; // the server is gone: this append was never acknowledged
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    await new Promise((r) => setTimeout(r, 1_500));
    await first.kill9();
    stop = true;
    await Promise.all(writers);
    cx.close();
    const total = [...acknowledged.values()].reduce((n, t) => n + t.length, 0);
    expect(total).toBeGreaterThan(20);

    const second = await first.restart();
    started.push(second);
    const after = new ContextdClient({ address: second.address });
    for (const [sessionId, texts] of acknowledged) {
      const stored: string[] = [];
      for await (const e of after.transcript(sessionId)) if (e.entry?.$case === "message") stored.push(messageText(e.entry.value));
      // Every acknowledged append is there, in order; at most the one in flight at the kill may also be.
      expect(stored.slice(0, texts.length)).toEqual(texts);
      expect(stored.length - texts.length).toBeLessThanOrEqual(2);
    }
    after.close();
  });
});
