import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import {
  AlreadyExistsError,
  ConflictError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "../../src/contract/errors.js";
import { CompactionEntry, Role, type Message, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { openStore } from "../../src/store/open-store.js";
import { SCHEMA_VERSION } from "../../src/store/sqlite/migrations.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { NewMessage, SessionLabels } from "../../src/store/types.js";

// Lets one test force colliding entry ids to provoke a UNIQUE violation in the middle of a batch.
const ids = vi.hoisted(() => ({ fixed: undefined as string | undefined }));
vi.mock("../../src/store/sqlite/rows.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/store/sqlite/rows.js")>();
  return { ...actual, newEntryId: () => ids.fixed ?? actual.newEntryId() };
});

const LABELS: SessionLabels = { sessionKey: "key-1", agentId: "agent-a" };

let dir: string;
let dbPath: string;
const open: SqliteStore[] = [];

function openAt(p = dbPath): SqliteStore {
  const s = SqliteStore.open(p);
  open.push(s);
  return s;
}

function msg(text: string, tokens: number, role = Role.ROLE_USER, extra: Partial<Message> = {}): NewMessage {
  return { message: textMessage(role, text, extra), tokenCount: tokens };
}

function compaction(summary: string, firstKeptEntryId: string): CompactionEntry {
  return CompactionEntry.fromPartial({ summary, firstKeptEntryId, tokensBefore: 1000, tokensAfter: 100, engineId: "legacy" });
}

function texts(entries: { message: Message }[]): string[] {
  return entries.map((e) => (e.message.content[0].block?.$case === "text" ? e.message.content[0].block.value.text : "?"));
}

async function appendN(store: SqliteStore, sessionId: string, n: number, from = 1): Promise<TranscriptEntry[]> {
  const batch = Array.from({ length: n }, (_, i) => msg(`m${from + i}`, 10 + from + i, i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER));
  return store.appendMessages(sessionId, batch, LABELS);
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-store-"));
  dbPath = path.join(dir, "transcripts.db");
  ids.fixed = undefined;
});

afterEach(async () => {
  vi.useRealTimers();
  for (const s of open.splice(0)) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("SqliteStore", () => {
  it("appends and reads back messages with ids, parents, seqs and token counts", async () => {
    const store = openAt();
    const before = Date.now();
    const first = await store.appendMessages(
      "s1",
      [msg("hello", 5), msg("hi there", 7, Role.ROLE_ASSISTANT), msg("at", 3, Role.ROLE_USER, { timestampMs: 1234 })],
      { ...LABELS, parentSessionId: "p0" },
    );
    expect(first.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(first.map((e) => e.parentId)).toEqual(["", first[0].id, first[1].id]);
    for (const e of first) {
      expect(e.id).toMatch(/^[0-9a-f]{16}$/);
      expect(e.entry?.$case).toBe("message");
      const m = e.entry?.value as Message;
      expect(m.id).toBe(e.id);
    }
    expect(first.map((e) => (e.entry?.value as Message).tokenCount)).toEqual([5, 7, 3]);
    expect(first[0].timestampMs).toBeGreaterThanOrEqual(before);
    expect(first[2].timestampMs).toBe(1234);
    expect((first[2].entry?.value as Message).timestampMs).toBe(1234);

    // A second append continues the chain; the labels of an existing session do not change.
    const second = await store.appendMessages("s1", [msg("more", 11)], { sessionKey: "other", agentId: "other" });
    expect(second[0].seq).toBe(4);
    expect(second[0].parentId).toBe(first[2].id);

    const session = await store.getSession("s1");
    expect(session).toMatchObject({
      sessionId: "s1",
      sessionKey: "key-1",
      agentId: "agent-a",
      parentSessionId: "p0",
      entryCount: 4,
      messageCount: 4,
      compactionCount: 0,
      totalTokens: 26,
      lastSeq: 4,
      latestCompactionId: "",
      systemAdditionTokens: 0,
    });
    expect(await store.readEntries("s1", 0, 100)).toEqual([...first, ...second]);

    const view = await store.readActiveView("s1");
    expect(view?.compaction).toBeUndefined();
    expect(view?.tokens).toBe(26);
    expect(view?.messages.map((m) => [m.seq, m.tokenCount, m.message.id === m.entryId, m.message.tokenCount])).toEqual([
      [1, 5, true, 5],
      [2, 7, true, 7],
      [3, 3, true, 3],
      [4, 11, true, 11],
    ]);
    expect(texts(view!.messages)).toEqual(["hello", "hi there", "at", "more"]);
    expect(await store.readActiveView("missing")).toBeUndefined();
    expect(await store.getSession("missing")).toBeUndefined();
  });

  it("writes nothing when a message in the middle of a batch cannot be encoded", async () => {
    const store = openAt();
    await appendN(store, "s1", 2);
    const bad = msg("bad", 1, 1.5 as Role); // int32 encoding rejects a non-integer role
    await expect(store.appendMessages("s1", [msg("ok", 1), bad, msg("ok2", 1)], LABELS)).rejects.toThrow(
      InvalidArgumentError,
    );
    expect((await store.readEntries("s1", 0, 100)).length).toBe(2);
    expect(await store.getSession("s1")).toMatchObject({ entryCount: 2, lastSeq: 2, totalTokens: 11 + 12 });

    // The session a failed first append would have created does not exist either.
    await expect(store.appendMessages("s2", [msg("ok", 1), bad], LABELS)).rejects.toThrow(InvalidArgumentError);
    expect(await store.getSession("s2")).toBeUndefined();
    await expect(store.appendMessages("s2", [msg("ok", 1), msg("neg", -1)], LABELS)).rejects.toThrow(/token count/);
    expect(await store.getSession("s2")).toBeUndefined();
  });

  it("rolls back the whole batch on a UNIQUE violation from SQLite", async () => {
    const store = openAt();
    await appendN(store, "s1", 1);
    ids.fixed = "dupdupdupdupdup0";
    await expect(appendN(store, "s1", 3)).rejects.toThrow(/UNIQUE/);
    ids.fixed = undefined;
    expect((await store.readEntries("s1", 0, 100)).map((e) => e.seq)).toEqual([1]);
    expect(await store.getSession("s1")).toMatchObject({ entryCount: 1, lastSeq: 1 });
    // The store is still usable and the chain continues from the last committed entry.
    const next = await appendN(store, "s1", 1, 2);
    expect(next[0].seq).toBe(2);
  });

  it("moves the active view with one and then two compactions", async () => {
    const store = openAt();
    const e = await appendN(store, "s1", 6); // tokens 11..16
    const c1 = await store.commitCompaction("s1", compaction("sum1", e[3].id), "", 50);
    expect(c1.seq).toBe(7);
    expect(c1.parentId).toBe(e[5].id);
    expect(c1.entry).toEqual({ $case: "compaction", value: compaction("sum1", e[3].id) });

    let view = (await store.readActiveView("s1"))!;
    expect(view.compaction).toEqual({ entry: c1, summaryTokens: 50 });
    expect(texts(view.messages)).toEqual(["m4", "m5", "m6"]);
    expect(view.tokens).toBe(50 + 14 + 15 + 16);
    expect(view.session).toMatchObject({ compactionCount: 1, latestCompactionId: c1.id, entryCount: 7, messageCount: 6 });

    const later = await appendN(store, "s1", 2, 7); // seq 8, 9
    expect(later[0].parentId).toBe(c1.id);
    view = (await store.readActiveView("s1"))!;
    expect(texts(view.messages)).toEqual(["m4", "m5", "m6", "m7", "m8"]);

    const c2 = await store.commitCompaction("s1", compaction("sum2", later[0].id), c1.id, 30);
    view = (await store.readActiveView("s1"))!;
    expect(view.compaction?.entry.id).toBe(c2.id);
    expect(view.compaction?.summaryTokens).toBe(30);
    expect(texts(view.messages)).toEqual(["m7", "m8"]);
    expect(view.tokens).toBe(30 + 17 + 18);
    expect(view.session).toMatchObject({ compactionCount: 2, latestCompactionId: c2.id, totalTokens: 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18 });

    // A compaction that keeps nothing: only messages appended after it are in the view.
    const c3 = await store.commitCompaction("s1", compaction("sum3", ""), c2.id, 5);
    expect((await store.readActiveView("s1"))!.messages).toEqual([]);
    await appendN(store, "s1", 1, 9);
    view = (await store.readActiveView("s1"))!;
    expect(view.compaction?.entry.id).toBe(c3.id);
    expect(texts(view.messages)).toEqual(["m9"]);
    expect(view.tokens).toBe(5 + 19);

    // History is never removed.
    expect((await store.readEntries("s1", 0, 100)).map((x) => x.entry?.$case)).toEqual([
      ...Array(6).fill("message"), "compaction", "message", "message", "compaction", "compaction", "message",
    ]);
  });

  it("rejects a stale expected compaction id with ConflictError and writes nothing", async () => {
    const store = openAt();
    const e = await appendN(store, "s1", 4);
    const c1 = await store.commitCompaction("s1", compaction("sum1", e[2].id), "", 20);
    const err = await store.commitCompaction("s1", compaction("late", e[3].id), "", 10).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as Error).message).toContain(c1.id);
    expect((err as Error).message).toContain('""');
    await expect(store.commitCompaction("s1", compaction("late", e[3].id), "0123456789abcdef", 10)).rejects.toThrow(
      /0123456789abcdef/,
    );
    expect((await store.readEntries("s1", 0, 100)).length).toBe(5);
    const view = (await store.readActiveView("s1"))!;
    expect(view.compaction?.entry.id).toBe(c1.id);
    expect(view.session.compactionCount).toBe(1);
  });

  it("rejects a first_kept_entry_id outside the active view", async () => {
    const store = openAt();
    const e = await appendN(store, "s1", 4);
    await expect(store.commitCompaction("s1", compaction("x", "nope"), "", 1)).rejects.toThrow(
      "first_kept_entry_id nope is not a message of session s1's active view",
    );
    const c1 = await store.commitCompaction("s1", compaction("sum", e[2].id), "", 1);
    // before the active view, the compaction entry itself, and another session's message
    const other = await appendN(store, "s2", 1);
    for (const bad of [e[0].id, e[1].id, c1.id, other[0].id]) {
      await expect(store.commitCompaction("s1", compaction("x", bad), c1.id, 1)).rejects.toThrow(InvalidArgumentError);
    }
    expect((await store.readEntries("s1", 0, 100)).length).toBe(5);
    await expect(store.commitCompaction("ghost", compaction("x", ""), "", 1)).rejects.toThrow(NotFoundError);
    // e[2] is the first message of the active view: still a valid cut.
    await expect(store.commitCompaction("s1", compaction("ok", e[2].id), c1.id, 1)).resolves.toMatchObject({ seq: 6 });
  });

  it("creates seeded sessions and refuses an existing id", async () => {
    const store = openAt();
    const rec = await store.createSession("child", { ...LABELS, parentSessionId: "parent" }, [
      { kind: "message", message: textMessage(Role.ROLE_USER, "a"), tokenCount: 1 },
      { kind: "message", message: textMessage(Role.ROLE_ASSISTANT, "b"), tokenCount: 2 },
      { kind: "message", message: textMessage(Role.ROLE_USER, "c"), tokenCount: 3 },
      { kind: "compaction", compaction: compaction("seed summary", "ignored"), firstKeptIndex: 1, summaryTokens: 9 },
      { kind: "message", message: textMessage(Role.ROLE_USER, "d"), tokenCount: 4 },
    ]);
    expect(rec).toMatchObject({ parentSessionId: "parent", entryCount: 5, messageCount: 4, compactionCount: 1, totalTokens: 10, lastSeq: 5 });
    const entries = await store.readEntries("child", 0, 10);
    expect(entries.map((x) => x.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(entries.map((x) => x.parentId)).toEqual(["", ...entries.slice(0, 4).map((x) => x.id)]);
    const c = entries[3].entry?.value as CompactionEntry;
    expect(c.firstKeptEntryId).toBe(entries[1].id);
    expect(rec.latestCompactionId).toBe(entries[3].id);
    const view = (await store.readActiveView("child"))!;
    expect(texts(view.messages)).toEqual(["b", "c", "d"]);
    expect(view.tokens).toBe(9 + 2 + 3 + 4);

    await expect(store.createSession("child", LABELS, [])).rejects.toThrow(AlreadyExistsError);
    await appendN(store, "plain", 1);
    await expect(store.createSession("plain", LABELS, [])).rejects.toThrow(AlreadyExistsError);
    expect((await store.readEntries("child", 0, 10)).length).toBe(5);

    // A seed compaction with no kept entry; an invalid index leaves no session behind.
    await store.createSession("fresh", LABELS, [
      { kind: "message", message: textMessage(Role.ROLE_USER, "old"), tokenCount: 1 },
      { kind: "compaction", compaction: compaction("s", ""), firstKeptIndex: null, summaryTokens: 2 },
      { kind: "message", message: textMessage(Role.ROLE_USER, "new"), tokenCount: 3 },
    ]);
    expect(texts((await store.readActiveView("fresh"))!.messages)).toEqual(["new"]);
    for (const k of [0, 7, -1]) {
      await expect(
        store.createSession("broken", LABELS, [
          { kind: "compaction", compaction: compaction("s", ""), firstKeptIndex: k, summaryTokens: 2 },
          { kind: "message", message: textMessage(Role.ROLE_USER, "x"), tokenCount: 3 },
        ]),
      ).rejects.toThrow(InvalidArgumentError);
    }
    expect(await store.getSession("broken")).toBeUndefined();
  });

  it("pages through the whole history with readEntries", async () => {
    const store = openAt();
    const e = await appendN(store, "s1", 12);
    const c = await store.commitCompaction("s1", compaction("s", e[8].id), "", 3);
    const rest = await appendN(store, "s1", 12, 13);
    const all = [...e, c, ...rest];
    const pages: TranscriptEntry[][] = [];
    for (let after = 0; ; ) {
      const page = await store.readEntries("s1", after, 10);
      if (page.length === 0) break;
      pages.push(page);
      after = page[page.length - 1].seq;
    }
    expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
    expect(pages.flat()).toEqual(all);
    expect(await store.readEntries("s1", 25, 10)).toEqual([]);
    await expect(store.readEntries("ghost", 0, 10)).rejects.toThrow(NotFoundError);
  });

  it("lists sessions by most recent activity with an opaque cursor", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const store = openAt();
    const times: Record<string, number> = { a: 1000, b: 3000, c: 2000, d: 3000, e: 500, f: 3000, g: 2500 };
    for (const [id, t] of Object.entries(times)) {
      vi.setSystemTime(t);
      await appendN(store, id, 1);
    }
    vi.setSystemTime(4000);
    await appendN(store, "a", 1, 2); // "a" becomes the most recent
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await store.listSessions(3, cursor);
      seen.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(["a", "b", "d", "f", "g", "c", "e"]);
    expect((await store.listSessions(100)).nextCursor).toBe("");
    expect((await store.getSession("a"))?.updatedAtMs).toBe(4000);
    expect((await store.getSession("a"))?.createdAtMs).toBe(1000);
    await expect(store.listSessions(3, "garbage")).rejects.toThrow(InvalidArgumentError);
  });

  it("deletes sessions and records system addition tokens", async () => {
    const store = openAt();
    await appendN(store, "s1", 3);
    await store.setSystemAdditionTokens("s1", 42);
    expect((await store.getSession("s1"))?.systemAdditionTokens).toBe(42);
    await expect(store.setSystemAdditionTokens("ghost", 1)).rejects.toThrow(NotFoundError);
    expect(await store.deleteSession("s1")).toBe(true);
    expect(await store.deleteSession("s1")).toBe(false);
    expect(await store.getSession("s1")).toBeUndefined();
    expect(await store.readActiveView("s1")).toBeUndefined();
    const raw = new Database(dbPath, { readonly: true });
    expect(raw.prepare("SELECT COUNT(*) AS n FROM entries").get()).toEqual({ n: 0 });
    raw.close();
  });

  it("sees everything after reopening the file, with the durable pragmas applied", async () => {
    const store = openAt();
    const e = await appendN(store, "s1", 5);
    await store.commitCompaction("s1", compaction("s", e[2].id), "", 7);
    await store.setSystemAdditionTokens("s1", 3);
    const entries = await store.readEntries("s1", 0, 100);
    const view = await store.readActiveView("s1");
    await store.close();
    await store.close(); // idempotent

    const again = openAt();
    expect(await again.readEntries("s1", 0, 100)).toEqual(entries);
    expect(await again.readActiveView("s1")).toEqual(view);
    const db = (again as unknown as { db: Database.Database }).db;
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("synchronous", { simple: true })).toBe(2); // FULL
    expect(db.pragma("foreign_keys", { simple: true })).toBe(1);
    expect(db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
  });

  it("makes an acknowledged append visible to a second connection without close()", async () => {
    const writer = openAt();
    const written = await appendN(writer, "s1", 3);
    const reader = openAt(); // a second connection to the same file; the writer stays open
    expect(await reader.readEntries("s1", 0, 100)).toEqual(written);
    const more = await appendN(reader, "s1", 1, 4);
    expect(more[0].parentId).toBe(written[2].id);
    expect((await writer.readActiveView("s1"))!.messages.length).toBe(4);
  });

  it("reads the active view by index range, not by scanning history", async () => {
    const store = openAt();
    const e = await appendN(store, "big", 3000);
    await store.commitCompaction("big", compaction("s", e[2995].id), "", 1);
    const view = (await store.readActiveView("big"))!;
    expect(view.messages.map((m) => m.seq)).toEqual([2996, 2997, 2998, 2999, 3000]);
    const db = (store as unknown as { db: Database.Database }).db;
    const plan = db
      .prepare("EXPLAIN QUERY PLAN SELECT seq, token_count, payload FROM entries WHERE session_id = ? AND seq >= ? AND kind = 'message' ORDER BY seq")
      .all("big", 2996) as { detail: string }[];
    expect(plan.map((p) => p.detail).join("; ")).toMatch(/SEARCH entries USING INDEX \S+ \(session_id=\? AND seq>\?\)/);
  });
});

describe("openStore", () => {
  it("opens sqlite: URLs, creating parent directories", async () => {
    const abs = path.join(dir, "a", "b", "abs.db");
    const s1 = await openStore(`sqlite:${abs}`);
    await s1.appendMessages("s", [msg("x", 1)], LABELS);
    await s1.close();
    expect(fs.existsSync(abs)).toBe(true);

    const rel = path.relative(process.cwd(), path.join(dir, "c", "rel.db"));
    const s2 = await openStore(`sqlite:./${rel}`);
    expect(s2.kind).toBe("sqlite");
    await s2.close();
    expect(fs.existsSync(path.join(dir, "c", "rel.db"))).toBe(true);

    const s3 = await openStore(`sqlite://${abs}`);
    expect((await s3.getSession("s"))?.messageCount).toBe(1);
    await s3.close();
  });

  it("refuses postgres (not built yet) and unknown schemes", async () => {
    const err = await openStore("postgres://u:secret@db:5432/contextd").catch((x: unknown) => x);
    expect(err).toBeInstanceOf(FailedPreconditionError);
    expect((err as Error).message).toMatch(/^store postgres:\/\/u:\*\*\*@db:5432\/contextd is not built yet: PostgreSQL support is a later issue; use sqlite:PATH$/);
    await expect(openStore("mysql://x")).rejects.toThrow(InvalidArgumentError);
    await expect(openStore("sqlite:")).rejects.toThrow(InvalidArgumentError);
  });
});
