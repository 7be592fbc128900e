/**
 * Durability and catching up: the SQLite store survives a restart, bootstrap and lazy bootstrap
 * import the host's transcript, messages that arrived out of order are put back in transcript
 * order, and the summarizer falls back from the host's model to the extractive one. Plus config.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContextEngineServiceAssembleRequest, ContextEngineServiceAssembleResponse } from "../../../../src/contract/gen/contextd/v1/engine.js";
import type { Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { summaryMessage as hostSummaryMessage } from "../../../../src/contract/messages.js";
import { DEFAULT_LOSSLESS_OPTIONS, losslessOptionsFromEnv, resolveLosslessOptions } from "../../../../engines/lossless/config.js";
import type { LosslessEngine } from "../../../../engines/lossless/engine.js";
import { extractiveCondense, extractiveLeaf } from "../../../../engines/lossless/extractive.js";
import { LosslessStore } from "../../../../engines/lossless/store.js";
import { codingSession } from "../../../fixtures/coding-session.js";
import { user } from "../../../fixtures/messages.js";
import { ctx, fakeHost, newEngine, session, stored } from "../../../engines-lossless/helpers.js";
import { buildHistory } from "../../../engines-lossless/histories.js";

const assemble = async (engine: LosslessEngine, budget: number, c = ctx(), view: Message[] = []) =>
  ContextEngineServiceAssembleResponse.fromPartial(
    await engine.assemble(ContextEngineServiceAssembleRequest.fromPartial({ session: session(), messages: view, tokenBudget: budget }), c),
  );
const ingest = (engine: LosslessEngine, messages: Message[], c = ctx()) =>
  engine.ingestBatch({ session: session(), messages, isHeartbeat: false, host: undefined }, c);
const ids = (engine: LosslessEngine) => engine.store.allMessages("s1").map((m) => m.entryId);

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const tempDb = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lossless-unit-"));
  dirs.push(dir);
  return path.join(dir, "nested", "lossless.db");
};

describe("durable store", () => {
  it("is WAL with synchronous FULL, and a restarted engine continues exactly where it stopped", async () => {
    const file = tempDb();
    const messages = stored(codingSession({ turns: 16, seed: 2 }).messages);
    const first = newEngine({}, LosslessStore.open(file));
    expect(first.store.db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(first.store.db.pragma("synchronous", { simple: true })).toBe(2);
    await ingest(first, messages);
    const before = await assemble(first, 32_000);
    const summaries = first.store.allSummaries("s1");
    expect(summaries.length).toBeGreaterThan(0);
    first.store.close();

    const second = newEngine({}, LosslessStore.open(file));
    expect(second.store.allSummaries("s1")).toEqual(summaries);
    expect(await assemble(second, 32_000)).toEqual(before);
    // And it goes on: more messages, more summaries, the same DAG underneath.
    const more = buildHistory([{ user: 100, exchanges: [{ assistant: 100, results: [20_000] }], wrapUp: 100 }], 50, "x");
    await ingest(second, more);
    const after = await assemble(second, 32_000);
    expect(after.estimatedTokens).toBeLessThanOrEqual(32_000);
    // Nothing is deleted: every earlier summary is still there, with the same text and span.
    const now = new Map(second.store.allSummaries("s1").map((s) => [s.id, s]));
    for (const s of summaries) expect(now.get(s.id)).toMatchObject({ text: s.text, firstOrd: s.firstOrd, lastOrd: s.lastOrd, depth: s.depth });
    expect(second.store.messageCount("s1")).toBe(messages.length + more.length);
    second.store.close();
  });

  it("refuses a database written by a newer schema", () => {
    const file = tempDb();
    const store = LosslessStore.open(file);
    store.db.pragma("user_version = 99");
    store.close();
    expect(() => LosslessStore.open(file)).toThrow(/schema version 99/);
  });
});

describe("bootstrap and catch-up", () => {
  const transcript = () => stored(codingSession({ turns: 6, seed: 4 }).messages);

  it("Bootstrap imports the host's whole transcript, once", async () => {
    const engine = newEngine();
    const host = fakeHost(transcript());
    expect(await engine.bootstrap({ session: session(), host: undefined, runtimeSettings: undefined }, ctx({ host }))).toMatchObject({
      bootstrapped: true,
      importedMessages: host.transcript.length,
    });
    expect(await engine.bootstrap({ session: session(), host: undefined, runtimeSettings: undefined }, ctx({ host }))).toMatchObject({ importedMessages: 0 });
    expect(ids(engine)).toEqual(host.transcript.map((m) => m.id));
    expect(await engine.bootstrap({ session: session(), host: undefined, runtimeSettings: undefined }, ctx())).toMatchObject({ bootstrapped: false });
  });

  it("the first call on an unknown session imports the transcript (lazy bootstrap); later calls do not re-read", async () => {
    const engine = newEngine();
    const all = transcript();
    const host = fakeHost(all.slice(0, -1));
    // The host appended the newest message and tells the engine about it.
    host.transcript = all;
    await ingest(engine, all.slice(-1), ctx({ host }));
    expect(ids(engine)).toEqual(all.map((m) => m.id));
    expect(host.reads).toBe(1);
    const next = stored([user("and one more thing")], "n");
    host.transcript = [...all, ...next];
    await ingest(engine, next, ctx({ host }));
    await assemble(engine, 32_000, ctx({ host }), host.transcript);
    expect(host.reads).toBe(1);
  });

  it("puts messages appended while it was away back in transcript order", async () => {
    const engine = newEngine();
    const all = transcript();
    const host = fakeHost(all.slice(0, 10));
    await ingest(engine, all.slice(0, 10), ctx({ host }));
    // Away for messages 10..14; told about 15 first (same process: no re-read on ingest).
    await ingest(engine, all.slice(15, 16), ctx({ host }));
    expect(ids(engine).slice(-1)).toEqual([all[15].id]);
    // The next Assemble's view shows messages it has never seen: it reads the transcript and reorders.
    host.transcript = all.slice(0, 16);
    await assemble(engine, 100_000, ctx({ host }), host.transcript);
    expect(ids(engine)).toEqual(all.slice(0, 16).map((m) => m.id));
  });

  it("re-reads when the view shows a host compaction it has not seen, and never stores summaries", async () => {
    const engine = newEngine();
    const all = transcript();
    const host = fakeHost(all, { compactionId: "compaction-1" });
    await ingest(engine, all, ctx({ host }));
    expect(host.reads).toBe(1);
    const view = [hostSummaryMessage("legacy summary", "compaction-2", 50), ...all.slice(-5)];
    await assemble(engine, 100_000, ctx({ host }), view);
    expect(host.reads).toBe(2);
    expect(ids(engine)).toEqual(all.map((m) => m.id));
  });

  it("without a host it catches up from the request's view", async () => {
    const engine = newEngine();
    const all = transcript();
    await ingest(engine, all.slice(0, 5));
    const res = await assemble(engine, 100_000, ctx(), [hostSummaryMessage("s", "c1", 10), ...all]);
    expect(ids(engine)).toEqual(all.map((m) => m.id));
    expect(res.messages).toEqual(all);
  });

  it("keeps going when reading the transcript fails", async () => {
    const engine = newEngine();
    const all = transcript();
    const host = fakeHost(all);
    host.readWholeTranscript = async () => {
      throw new Error("host unavailable");
    };
    await ingest(engine, all.slice(0, 3), ctx({ host }));
    expect(ids(engine)).toEqual(all.slice(0, 3).map((m) => m.id));
  });
});

describe("summarizers", () => {
  const messages = stored(codingSession({ turns: 10, seed: 6 }).messages);

  it("uses the host's model when it has one", async () => {
    const engine = newEngine();
    const host = fakeHost(messages, { complete: () => "MODEL SUMMARY of src/billing/invoice_reconciler.ts" });
    await ingest(engine, messages, ctx({ host }));
    const res = await assemble(engine, 32_000, ctx({ host }));
    expect(engine.store.allSummaries("s1").every((s) => s.summarizer === "host-model")).toBe(true);
    expect(res.messages[0].content[0].block?.$case === "text" && res.messages[0].content[0].block.value.text).toContain("MODEL SUMMARY");
  });

  it("falls back to the extractive summarizer when the host has none, and remembers that", async () => {
    const engine = newEngine();
    const host = fakeHost(messages);
    await ingest(engine, messages, ctx({ host }));
    await assemble(engine, 32_000, ctx({ host }));
    expect(engine.store.allSummaries("s1").length).toBeGreaterThan(1);
    expect(engine.store.allSummaries("s1").every((s) => s.summarizer === "extractive")).toBe(true);
    expect(host.completes).toBe(1);
  });

  it("does not ask the host when told not to", async () => {
    const engine = newEngine({ useHostModel: false });
    const host = fakeHost(messages, { complete: () => "MODEL" });
    await ingest(engine, messages, ctx({ host }));
    await assemble(engine, 32_000, ctx({ host }));
    expect(host.completes).toBe(0);
  });

  it("condensing merges summaries: the oldest task stays, older latest requests become earlier requests", () => {
    const a = extractiveLeaf([user("Fix the crash in src/a.ts, see PAY-1.")], { maxChars: 3000 });
    const b = extractiveLeaf([user("Now speed up src/b.ts.")], { maxChars: 3000 });
    const merged = extractiveCondense([a, b], { maxChars: 3000 });
    expect(merged.indexOf("Fix the crash in src/a.ts")).toBeLessThan(merged.indexOf("Now speed up src/b.ts."));
    expect(merged).toMatch(/## Latest user request\nNow speed up src\/b\.ts\./);
    expect(merged).toContain("PAY-1");
    expect(merged.length).toBeLessThanOrEqual(3000);
  });
});

describe("configuration", () => {
  it("reads LOSSLESS_* variables and validates them", () => {
    expect(resolveLosslessOptions(losslessOptionsFromEnv({}))).toEqual(DEFAULT_LOSSLESS_OPTIONS);
    expect(
      losslessOptionsFromEnv({ LOSSLESS_DB: "/tmp/x.db", LOSSLESS_FRESH_TAIL_TOKENS: "4000", LOSSLESS_CHUNK_TOKENS: "3000", LOSSLESS_FANOUT: "8" }),
    ).toEqual({ dbPath: "/tmp/x.db", freshTailTokens: 4000, chunkTokens: 3000, fanout: 8 });
    expect(() => losslessOptionsFromEnv({ LOSSLESS_FANOUT: "four" })).toThrow(/LOSSLESS_FANOUT/);
    expect(() => resolveLosslessOptions({ fanout: 1 })).toThrow(/fanout/);
    expect(() => resolveLosslessOptions({ chunkTokens: 0 })).toThrow(/chunkTokens/);
  });
});
