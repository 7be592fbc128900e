import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { Role } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { searchPage } from "../../../../src/store/search-hits.js";
import { parseQuery } from "../../../../src/store/search-text.js";
import { openIndexFile, searchIndexPath, SearchIndexer } from "../../../../src/store/sqlite/search-index.js";
import { MAX_INDEX_LAG, SqliteStore } from "../../../../src/store/sqlite/sqlite-store.js";
import type { SessionLabels } from "../../../../src/store/types.js";

// The SQLite store's search index (src/store/sqlite/search-index.ts): a log written in the append's
// transaction, applied afterwards to an index file of its own, exactly once. From the sources the
// indexer runs inline (no compiled worker file); test/reliability/search-index-crash.test.ts runs
// the thread in a real contextd that is SIGKILLed.

const LABELS: SessionLabels = { sessionKey: "", agentId: "agent-a" };

let dir: string;
let dbPath: string;
const open: SqliteStore[] = [];

function openAt(p = dbPath): SqliteStore {
  const s = SqliteStore.open(p);
  open.push(s);
  return s;
}

async function closeAll(): Promise<void> {
  for (const s of open.splice(0)) await s.close();
}

const say = (text: string) => ({ message: textMessage(Role.ROLE_USER, text), tokenCount: 1 });

async function found(store: SqliteStore, sessionId: string, query: string, agentWide = false): Promise<Array<[string, number]>> {
  const page = await searchPage(store, { sessionId, agentId: agentWide ? LABELS.agentId : undefined, terms: parseQuery(query) }, "newest", 100, undefined);
  return page.hits.map((h) => [h.sessionId, h.seq]);
}

/** The index's rows, by reading its file (after the stores are closed). */
function indexRows(): number[] {
  const ix = new Database(searchIndexPath(dbPath), { readonly: true });
  try {
    return (ix.prepare("SELECT rowid FROM entry_search ORDER BY rowid").all() as { rowid: number }[]).map((r) => r.rowid);
  } finally {
    ix.close();
  }
}

function readOne(file: string, sql: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare(sql).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

const logRows = () => readOne(dbPath, "SELECT count(*) AS n FROM search_log");

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-search-index-"));
  dbPath = path.join(dir, "transcripts.db");
});

afterEach(async () => {
  await closeAll();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("the SQLite search index (a log applied after the append)", () => {
  it("finds an entry once its append has returned, and indexes each entry once however often the store reopens", async () => {
    let store = openAt();
    await store.appendMessages("s1", [say("alpha invoice_rounding.ts"), say("beta"), say("alpha again")], LABELS);
    expect(await found(store, "s1", "alpha")).toEqual([
      ["s1", 3],
      ["s1", 1],
    ]);
    // Logged but not yet applied when the store closes: applied by the next one, once.
    await store.appendMessages("s1", [say("gamma alpha")], LABELS);
    await closeAll();
    store = openAt();
    expect(await found(store, "s1", "alpha")).toEqual([
      ["s1", 4],
      ["s1", 3],
      ["s1", 1],
    ]);
    expect(await found(store, "s1", "invoice_rounding.ts")).toEqual([["s1", 1]]);
    await closeAll();
    store = openAt();
    expect(await found(store, "s1", "beta")).toEqual([["s1", 2]]);
    await closeAll();
    expect(indexRows()).toHaveLength(4);
    // Applied rows are deleted from the log (with the appends after them; here at close).
    expect(logRows()).toBe(0);
  });

  it("applies rewrites and deletions in order: a rewritten entry is found by its new text, a deleted session by nothing, a new one under its number by its own", async () => {
    const store = openAt();
    const [first] = await store.appendMessages("s1", [say("old words here"), say("keep this")], LABELS);
    await store.rewriteEntries("s1", [{ entryId: first.id, message: textMessage(Role.ROLE_USER, "new words here"), tokenCount: 1 }], "test");
    expect(await found(store, "s1", "old")).toEqual([]);
    expect(await found(store, "s1", "new words")).toEqual([["s1", 1]]);
    // Rewritten again before the indexer saw the first rewrite, then the session deleted and made
    // anew under the same id (and the same search number, the highest): nothing of the old one stays.
    await store.rewriteEntries("s1", [{ entryId: first.id, message: textMessage(Role.ROLE_USER, "newer words"), tokenCount: 1 }], "test");
    expect(await store.deleteSession("s1")).toBe(true);
    await store.appendMessages("s1", [say("fresh start keep")], LABELS);
    expect(await found(store, "s1", "keep")).toEqual([["s1", 1]]);
    expect(await found(store, "s1", "words")).toEqual([]);
    await closeAll();
    expect(indexRows()).toHaveLength(1);
  });

  it("rebuilds an index file that is missing, unreadable, another store's, or ahead of the store (a restored backup)", async () => {
    let store = openAt();
    await store.appendMessages("s1", [say("needle one"), say("hay")], LABELS);
    await store.appendMessages("s2", [say("needle two")], LABELS);
    expect(await found(store, "s1", "needle", true)).toHaveLength(2);
    await closeAll();
    const indexFile = searchIndexPath(dbPath);

    fs.rmSync(indexFile);
    store = openAt();
    expect(await found(store, "s1", "needle", true)).toEqual([
      ["s2", 1],
      ["s1", 1],
    ]);
    await closeAll();

    fs.writeFileSync(indexFile, "not a database at all, not even close".repeat(200));
    fs.rmSync(`${indexFile}-wal`, { force: true });
    store = openAt();
    expect(await found(store, "s1", "needle", true)).toHaveLength(2);
    await closeAll();

    // Another store's index file (its own entries at the same rowids) in its place.
    const other = path.join(dir, "other.db");
    const o = openAt(other);
    await o.appendMessages("x", [say("needle elsewhere"), say("needle elsewhere too")], LABELS);
    expect(await found(o, "x", "elsewhere")).toHaveLength(2);
    await closeAll();
    fs.copyFileSync(searchIndexPath(other), indexFile);
    store = openAt();
    expect(await found(store, "s1", "elsewhere", true)).toEqual([]);
    expect(await found(store, "s1", "needle", true)).toHaveLength(2);
    await closeAll();

    // Ahead of the store's log: as if the store were restored from a backup older than its index.
    const ix = openIndexFile(indexFile, dbPath);
    ix.prepare("UPDATE search_state SET applied_op = applied_op + 1000").run();
    ix.prepare("DELETE FROM entry_search").run();
    ix.close();
    store = openAt();
    expect(await found(store, "s1", "needle", true)).toHaveLength(2);
    await closeAll();
    expect(indexRows()).toHaveLength(3);
  });

  it("applies each log row once: a step commits the index rows with its mark, and a second indexer sees the mark", async () => {
    const store = openAt();
    await store.appendMessages("s1", [say("one"), say("two")], LABELS);
    await store.appendMessages("s2", [say("three")], LABELS);
    const a = openIndexFile(searchIndexPath(dbPath), dbPath);
    const b = openIndexFile(searchIndexPath(dbPath), dbPath);
    try {
      // The first step of a new index file builds it from the store; then nothing is left to apply.
      expect(new SearchIndexer(a, "src", "main").step(1)).toEqual({ applied: 3, more: false });
      expect(new SearchIndexer(b, "src", "main").step(10)).toEqual({ applied: 3, more: false });
      await store.appendMessages("s1", [say("four"), say("five")], LABELS);
      expect(new SearchIndexer(b, "src", "main").step(1)).toEqual({ applied: 4, more: true });
      expect(new SearchIndexer(a, "src", "main").step(10)).toEqual({ applied: 5, more: false });
      expect(new SearchIndexer(b, "src", "main").step(10)).toEqual({ applied: 5, more: false });
    } finally {
      a.close();
      b.close();
    }
    expect(await found(store, "s1", "five")).toEqual([["s1", 4]]);
    await closeAll();
    expect(indexRows()).toHaveLength(5);
  });

  it("answers no append while the index is more than MAX_INDEX_LAG log rows behind it", async () => {
    // Inline here (no thread), the index moves only when something waits for it: a search, or an
    // append past the bound.
    const store = openAt();
    const batch = Array.from({ length: 1000 }, (_, i) => say(`word${i % 50}`));
    for (let i = 0; i * 1000 <= MAX_INDEX_LAG + 1000; i++) await store.appendMessages(`s${i % 3}`, batch, LABELS);
    const logged = readOne(dbPath, "SELECT seq AS n FROM sqlite_sequence WHERE name = 'search_log'");
    const applied = readOne(searchIndexPath(dbPath), "SELECT applied_op AS n FROM search_state");
    expect(logged).toBeGreaterThan(MAX_INDEX_LAG);
    expect(applied).toBeGreaterThanOrEqual(logged - MAX_INDEX_LAG);
  });
});
