/**
 * The group commit's WAL sync (src/store/sqlite/wal-sync.ts): the fdatasync runs off the event loop,
 * every caller is answered by a sync that started after it asked, and an append is answered only
 * once that sync is done — committed rows are not acknowledged before they are on disk. The syncs are
 * held by the test (the real fdatasync runs when released) to see the ordering.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Role } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { GroupCommit } from "../../../../src/store/sqlite/group-commit.js";
import { migrate } from "../../../../src/store/sqlite/migrations.js";
import { prepareStatements } from "../../../../src/store/sqlite/statements.js";
import { appendInTransaction } from "../../../../src/store/sqlite/transcript-writes.js";
import { WalSync } from "../../../../src/store/sqlite/wal-sync.js";

/** fdatasync calls held until released (then the real one runs); `called()` waits for the next call. */
function heldSyncs() {
  const calls: Array<() => void> = [];
  const waiters: Array<() => void> = [];
  const fdatasync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => {
    calls.push(() => fs.fdatasync(fd, done));
    waiters.splice(0).forEach((w) => w());
  };
  return {
    fdatasync,
    count: () => calls.length,
    called: (n: number) => new Promise<void>((resolve) => (calls.length >= n ? resolve() : waiters.push(() => calls.length >= n && resolve()))),
    release: (i: number) => calls[i](),
  };
}

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-wal-sync-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function settled<T>(p: Promise<T>) {
  const state = { done: false, error: undefined as unknown };
  p.then(
    () => (state.done = true),
    (e: unknown) => ((state.done = true), (state.error = e)),
  );
  return state;
}

describe("WalSync", () => {
  it("answers a caller that comes while a sync runs with the next sync, which serves all such callers", async () => {
    const file = path.join(dir, "f-wal");
    fs.writeFileSync(file, "x");
    const held = heldSyncs();
    const wal = new WalSync(file, held.fdatasync);
    const a = wal.sync();
    await held.called(1);
    const b = wal.sync();
    const c = wal.sync();
    const [sb, sc] = [settled(b), settled(c)];
    expect(held.count()).toBe(1); // b and c wait: the running sync may have started before their commits
    held.release(0);
    await a;
    await held.called(2);
    expect([sb.done, sc.done]).toEqual([false, false]);
    held.release(1);
    await Promise.all([b, c]);
    expect(held.count()).toBe(2);
    await wal.close();
  });

  it("rejects the callers of a sync that fails", async () => {
    const wal = new WalSync(path.join(dir, "missing-wal"));
    await expect(wal.sync()).rejects.toThrow(/ENOENT/);
  });
});

describe("GroupCommit with a WAL sync", () => {
  it("commits without syncing, answers after the sync, and leaves the connection at synchronous = FULL", async () => {
    const file = path.join(dir, "t.db");
    const db = new Database(file);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    migrate(db);
    const stmts = prepareStatements(db);
    const held = heldSyncs();
    const wal = new WalSync(`${file}-wal`, held.fdatasync);
    // A slice no machine uses up: both writes in one group, however slow this run's first statements.
    const commits = new GroupCommit(db, wal, 60_000);
    const write = (s: string) =>
      commits.write(() =>
        appendInTransaction(stmts, s, [{ message: textMessage(Role.ROLE_USER, `hello ${s}`), tokenCount: 3 }], { sessionKey: "", agentId: "a" }, 100),
      );
    const one = write("s1");
    const two = write("s2");
    const states = [settled(one), settled(two)];
    await held.called(1);
    // Committed (another connection reads the rows), not yet answered: the sync has not run.
    const other = new Database(file, { readonly: true });
    expect((other.prepare("SELECT COUNT(*) AS n FROM entries").get() as { n: number }).n).toBe(2);
    other.close();
    expect(states.map((s) => s.done)).toEqual([false, false]);
    expect(db.pragma("synchronous", { simple: true })).toBe(2); // FULL again for the other writes
    held.release(0);
    const [e1, e2] = await Promise.all([one, two]);
    expect([e1[0].entry?.$case, e2[0].entry?.$case]).toEqual(["message", "message"]);
    expect(held.count()).toBe(1); // the group shared one sync
    await wal.close();
    db.close();
  });
});
