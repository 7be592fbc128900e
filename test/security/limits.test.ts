/**
 * Size limits an untrusted runtime cannot talk its way past: a session's entry count
 * (limits.max_session_entries) on append and on import, an import's size (limits.max_import_bytes)
 * and a batch's length (limits.max_messages_per_append). Each refusal is RESOURCE_EXHAUSTED naming
 * the limit, writes nothing — the transcript read back is as before — and leaves the server up.
 *
 * The message-size limit and the batch limit's status are covered by
 * test/integration/bad-input.test.ts; this file adds what it does not check.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { healthStatus } from "./helpers/public-services.js";
import { refusal } from "../helpers/registry-client.js";

const MAX_ENTRIES = 5;
const MAX_IMPORT_BYTES = 4096;
const MAX_BATCH = 4;

/** Conversation lines (one message per line), the simplest file ImportTranscript takes. */
const lines = (n: number, pad = 0): Buffer =>
  Buffer.from(Array.from({ length: n }, (_, i) => JSON.stringify({ role: "user", content: `line ${i} ${"x".repeat(pad)}` })).join("\n"));

describe("size limits refuse with RESOURCE_EXHAUSTED, write nothing, and the server stays up", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    contextd = await startContextd({
      config: { limits: { max_session_entries: MAX_ENTRIES, max_import_bytes: MAX_IMPORT_BYTES, max_messages_per_append: MAX_BATCH } },
    });
    cx = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  const transcriptIds = async (sessionId: string): Promise<string[]> => (await cx.getTranscript({ session: { sessionId } })).entries.map((e) => e.id);
  const stillUp = async (): Promise<void> => {
    expect(await healthStatus(contextd.address)).toBe("SERVING");
    await cx.appendMessages({ session: { sessionId: `alive-${Math.random()}` }, messages: [user("still here")] });
  };

  it("session size: an append that would pass limits.max_session_entries writes none of its messages", async () => {
    const session = { sessionId: "full" };
    await cx.appendMessages({ session, messages: [user("1"), user("2"), user("3")] });
    const before = await transcriptIds("full");
    const err = await refusal(cx.appendMessages({ session, messages: [user("4"), user("5"), user("6")] }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_session_entries");
    expect(await transcriptIds("full")).toEqual(before);
    // Up to the limit is fine; one past it is not.
    await cx.appendMessages({ session, messages: [user("4"), user("5")] });
    expect(await transcriptIds("full")).toHaveLength(MAX_ENTRIES);
    expect((await refusal(cx.appendMessages({ session, messages: [user("6")] }))).code).toBe(status.RESOURCE_EXHAUSTED);
    expect(await transcriptIds("full")).toHaveLength(MAX_ENTRIES);
    await stillUp();
  });

  it("session size: an import of more entries than limits.max_session_entries creates no session", async () => {
    const err = await refusal(cx.importTranscript({ session: { sessionId: "imported-too-long" }, jsonl: lines(MAX_ENTRIES + 1) }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_session_entries");
    expect((await refusal(cx.getSession({ session: { sessionId: "imported-too-long" } }))).code).toBe(status.NOT_FOUND);
    await stillUp();
  });

  it("import size: a file over limits.max_import_bytes is refused before it is parsed; no session is created", async () => {
    const big = lines(2, MAX_IMPORT_BYTES);
    expect(big.byteLength).toBeGreaterThan(MAX_IMPORT_BYTES);
    const err = await refusal(cx.importTranscript({ session: { sessionId: "imported-too-big" }, jsonl: big }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_import_bytes");
    expect((await refusal(cx.getSession({ session: { sessionId: "imported-too-big" } }))).code).toBe(status.NOT_FOUND);
    // A file within both limits imports.
    expect((await cx.importTranscript({ session: { sessionId: "imported-fine" }, jsonl: lines(MAX_ENTRIES) })).importedEntries).toBe(MAX_ENTRIES);
    await stillUp();
  });

  it("batch size: an append over limits.max_messages_per_append writes none of the batch", async () => {
    const session = { sessionId: "batched" };
    await cx.appendMessages({ session, messages: [user("first")] });
    const before = await transcriptIds("batched");
    const err = await refusal(cx.appendMessages({ session, messages: Array.from({ length: MAX_BATCH + 1 }, (_, i) => user(`m${i}`)) }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_messages_per_append");
    expect(await transcriptIds("batched")).toEqual(before);
    await stillUp();
  });
});
