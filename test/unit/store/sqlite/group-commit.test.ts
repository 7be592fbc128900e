/**
 * SQLite group commit (src/store/sqlite/group-commit.ts): appends that arrive together are written
 * in one transaction, yet each call keeps its own all-or-nothing answer — a call refused for its
 * entry limit writes nothing while the others of its group commit — and every answered append is
 * in the file, read back by a second connection (what a restart would see).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ResourceExhaustedError } from "../../../../src/contract/errors.js";
import { Role } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { GroupCommit } from "../../../../src/store/sqlite/group-commit.js";
import { SqliteStore } from "../../../../src/store/sqlite/sqlite-store.js";

const LABELS = { sessionKey: "", agentId: "a" };
const batch = (session: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ message: textMessage(Role.ROLE_USER, `${session} m${i}`), tokenCount: 5 }));

let dir: string;
let store: SqliteStore;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-group-commit-"));
  store = SqliteStore.open(path.join(dir, "t.db"));
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Rows as another connection sees them: only what was committed. */
function committed(): Record<string, number> {
  const other = new Database(path.join(dir, "t.db"), { readonly: true });
  try {
    const rows = other.prepare("SELECT session_id AS s, COUNT(*) AS n FROM entries GROUP BY session_id").all() as { s: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.s, r.n]));
  } finally {
    other.close();
  }
}

describe("SQLite group commit", () => {
  it("concurrent appends of many sessions all commit, each answered with its own entries", async () => {
    const sessions = Array.from({ length: 20 }, (_, i) => `s${i}`);
    const answers = await Promise.all(sessions.map((s, i) => store.appendMessages(s, batch(s, 1 + (i % 3)), LABELS)));
    answers.forEach((entries, i) => {
      expect(entries).toHaveLength(1 + (i % 3));
      for (const e of entries)
        expect(
          e.entry?.$case === "message" &&
            e.entry.value.content[0].block?.$case === "text" &&
            e.entry.value.content[0].block.value.text.startsWith(`${sessions[i]} `),
        ).toBe(true);
    });
    expect(committed()).toEqual(Object.fromEntries(sessions.map((s, i) => [s, 1 + (i % 3)])));
  });

  it("a call over its entry limit is refused alone: the rest of its group commits", async () => {
    const results = await Promise.allSettled([
      store.appendMessages("ok-1", batch("ok-1", 2), LABELS),
      store.appendMessages("too-big", batch("too-big", 5), LABELS, 3),
      store.appendMessages("ok-2", batch("ok-2", 2), LABELS),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(ResourceExhaustedError);
    expect(committed()).toEqual({ "ok-1": 2, "ok-2": 2 });
    expect(await store.getSession("too-big")).toBeUndefined();
  });

  it("appends of one session in one group keep their order and their seqs", async () => {
    await Promise.all([0, 1, 2, 3].map((k) => store.appendMessages("same", batch(`same-${k}`, 2), LABELS)));
    const entries = await store.readEntries("same", 0, 100);
    const texts = entries.map((e) =>
      e.entry?.$case === "message" && e.entry.value.content[0].block?.$case === "text" ? e.entry.value.content[0].block.value.text : "",
    );
    expect(texts).toEqual([0, 1, 2, 3].flatMap((k) => [`same-${k} m0`, `same-${k} m1`]));
    expect(entries.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("a group commits once its jobs used up the slice: the jobs left commit in later groups, in order, each answered once", async () => {
    const file = path.join(dir, "slices.db");
    const db = new Database(file);
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE t (n INTEGER)");
    const other = new Database(file, { readonly: true });
    const seenByOther = () => (other.prepare("SELECT COUNT(*) AS c FROM t").get() as { c: number }).c;
    try {
      // A slice of 0 ms: every group holds exactly one job (a group always makes progress).
      const commits = new GroupCommit(db, undefined, 0);
      const jobs = [0, 1, 2, 3, 4].map((n) =>
        commits.write(() => {
          if (n === 2) throw new Error("job 2 fails alone");
          db.prepare("INSERT INTO t (n) VALUES (?)").run(n);
          // What another connection sees while this job's group is open: every earlier group, committed.
          return seenByOther();
        }),
      );
      const results = await Promise.allSettled(jobs);
      expect(results.map((r) => (r.status === "fulfilled" ? r.value : "failed"))).toEqual([0, 1, "failed", 2, 3]);
      expect((other.prepare("SELECT n FROM t ORDER BY rowid").all() as { n: number }[]).map((r) => r.n)).toEqual([0, 1, 3, 4]);

      // Within its slice (one no machine uses up here), jobs that arrive in one turn share one transaction.
      const together = new GroupCommit(db, undefined, 60_000);
      const seen = await Promise.all([5, 6, 7].map((n) => together.write(() => (db.prepare("INSERT INTO t (n) VALUES (?)").run(n), seenByOther()))));
      expect(seen).toEqual([4, 4, 4]);
    } finally {
      other.close();
      db.close();
    }
  });
});
