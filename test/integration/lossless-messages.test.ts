/**
 * Property, end to end: random OpenClaw messages (test/fixtures/openclaw-messages.ts) appended to a
 * real contextd over gRPC come back deep-equal — from GetTranscript (the store), from Assemble (the
 * active view) and from ExportTranscript (the session file) — with token counts that are real.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromContextdMessage, toContextdMessage } from "../../src/openclaw/agent-message.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { agentMessage } from "../fixtures/openclaw-messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;
const asJson = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

describe("OpenClaw messages through contextd, append → store → assemble / transcript / export", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let n = 0;

  beforeAll(async () => {
    contextd = await startContextd();
    cx = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("every message comes back deep-equal, from every read path", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(agentMessage, { minLength: 1, maxLength: 6 }), async (batch) => {
        const session = { sessionId: `lossless-${++n}` };
        const appended = await cx.appendMessages({ session, messages: batch.map((m, i) => toContextdMessage(m, `messages[${i}]`)) });
        for (const t of appended.tokenCounts) expect(t).toBeGreaterThan(0);
        const expected = batch.map(asJson);

        const stored = (await cx.getTranscript({ session, pageSize: 100 })).entries.map((e) =>
          e.entry?.$case === "message" ? fromContextdMessage(e.entry.value) : undefined,
        );
        expect(stored).toEqual(expected);

        // A message the runtime excluded from context is kept, but never sent to the model.
        const assembled = await cx.assemble({ session, tokenBudget: 1_000_000, autoCompact: false });
        expect(assembled.messages.map(fromContextdMessage)).toEqual(batch.filter((m) => m.excludeFromContext !== true).map(asJson));

        const file = Buffer.from((await cx.exportTranscript({ session })).jsonl)
          .toString("utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { message?: unknown });
        expect(file.slice(1).map((e) => e.message)).toEqual(expected);
      }),
      { numRuns: 40, ...(seed === undefined ? {} : { seed }) },
    );
  });
});
