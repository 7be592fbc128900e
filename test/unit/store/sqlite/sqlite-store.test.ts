import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import type Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { InvalidArgumentError, UnavailableError } from "../../../../src/contract/errors.js";
import { CompactionEntry, Role, type TranscriptEntry } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { openStore } from "../../../../src/store/open-store.js";
import { SCHEMA_VERSION } from "../../../../src/store/sqlite/migrations.js";
import { SqliteStore } from "../../../../src/store/sqlite/sqlite-store.js";
import type { SessionLabels } from "../../../../src/store/types.js";

// SQLite only: the file's pragmas, its query plans, a forced id collision, and sqlite: URLs. What
// every store does is in test/store/conformance/ (sqlite-store.conformance.test.ts, test/store/postgres-conformance.test.ts).

// Lets one test force colliding entry ids to provoke a UNIQUE violation in the middle of a batch.
const ids = vi.hoisted(() => ({ fixed: undefined as string | undefined }));
vi.mock("../../../../src/store/rows.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../../../src/store/rows.js")>();
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

async function appendN(store: SqliteStore, sessionId: string, n: number, from = 1): Promise<TranscriptEntry[]> {
  const batch = Array.from({ length: n }, (_, i) => ({ message: textMessage(Role.ROLE_USER, `m${from + i}`), tokenCount: 10 + from + i }));
  return store.appendMessages(sessionId, batch, LABELS);
}

const db = (store: SqliteStore) => (store as unknown as { db: Database.Database }).db;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-store-"));
  dbPath = path.join(dir, "transcripts.db");
  ids.fixed = undefined;
});

afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("SqliteStore (SQLite only)", () => {
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

  it("applies the durable pragmas and records the schema version", async () => {
    const store = openAt();
    await appendN(store, "s1", 1);
    await store.ping();
    expect(db(store).pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db(store).pragma("synchronous", { simple: true })).toBe(2); // FULL
    expect(db(store).pragma("foreign_keys", { simple: true })).toBe(1);
    expect(db(store).pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    expect(store.path).toBe(dbPath);
  });

  it("reads the active view by index range, not by scanning history", async () => {
    const store = openAt();
    const e = await appendN(store, "big", 3000);
    await store.commitCompaction("big", CompactionEntry.fromPartial({ summary: "s", firstKeptEntryId: e[2995].id }), "", 1);
    const view = (await store.readActiveView("big"))!;
    expect(view.messages.map((m) => m.seq)).toEqual([2996, 2997, 2998, 2999, 3000]);
    const plan = db(store)
      .prepare("EXPLAIN QUERY PLAN SELECT seq, token_count, payload FROM entries WHERE session_id = ? AND seq >= ? AND kind = 'message' ORDER BY seq")
      .all("big", 2996) as { detail: string }[];
    expect(plan.map((p) => p.detail).join("; ")).toMatch(/SEARCH entries USING INDEX \S+ \(session_id=\? AND seq>\?\)/);
  });

  it("reads the pinned system messages before the cut through the partial index entries_pinned", async () => {
    const store = openAt();
    await store.appendMessages("big", [{ message: textMessage(Role.ROLE_SYSTEM, "rules"), tokenCount: 7 }], LABELS);
    const e = await appendN(store, "big", 3000);
    await store.commitCompaction("big", CompactionEntry.fromPartial({ summary: "s", firstKeptEntryId: e[2995].id }), "", 1);
    const view = (await store.readActiveView("big"))!;
    expect(view.pinnedCount).toBe(1);
    expect(view.messages.map((m) => m.seq)).toEqual([1, 2997, 2998, 2999, 3000, 3001]);
    // The statements the store runs, as prepared: both must search the partial index, never scan.
    const stmts = (store as unknown as { stmts: Record<"pinnedMessages" | "pinnedTokens", { source: string }> }).stmts;
    for (const stmt of [stmts.pinnedMessages, stmts.pinnedTokens]) {
      const plan = db(store).prepare(`EXPLAIN QUERY PLAN ${stmt.source}`).all("big", 2997) as { detail: string }[];
      expect(plan.map((p) => p.detail).join("; ")).toMatch(/SEARCH entries USING (COVERING )?INDEX entries_pinned \(session_id=\? AND seq<\?\)/);
    }
  });
});

describe("openStore", () => {
  it("opens sqlite: URLs, creating parent directories", async () => {
    const abs = path.join(dir, "a", "b", "abs.db");
    const s1 = await openStore(`sqlite:${abs}`);
    await s1.appendMessages("s", [{ message: textMessage(Role.ROLE_USER, "x"), tokenCount: 1 }], LABELS);
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

  it("refuses unknown schemes and empty URLs, and never prints a postgres password", async () => {
    await expect(openStore("mysql://x")).rejects.toThrow(InvalidArgumentError);
    await expect(openStore("sqlite:")).rejects.toThrow(InvalidArgumentError);
    await expect(openStore(" ")).rejects.toThrow(InvalidArgumentError);
    // Nothing listens on port 1: the store is unavailable, and the message names it without the secret.
    const err = await openStore("postgres://u:secret@127.0.0.1:1/contextd?connect_timeout_ms=2000").catch((x: unknown) => x);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(/^PostgreSQL store at 127\.0\.0\.1:1\/contextd is unavailable: .*ECONNREFUSED/);
    expect((err as Error).message).not.toContain("secret");
    await expect(openStore("postgresql://u@127.0.0.1:5432/x?pool_max=zero")).rejects.toThrow("pool_max must be a positive integer");
  });
});
