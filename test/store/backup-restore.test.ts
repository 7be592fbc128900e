import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import { TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { openStore, type ContextdStore } from "../../src/store/open-store.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { createScratchDatabase } from "../helpers/scratch-postgres.js";
import { run } from "../cli/run-contextctl.js";

const cleanup: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "contextd-backup-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function opened(url: string): Promise<ContextdStore> {
  const s = await openStore(url);
  cleanup.push(() => s.close());
  return s;
}

/** Every entry of a session through contextd's own API, encoded. */
async function liveTranscript(cx: ContextdClient, sessionId: string): Promise<Buffer[]> {
  const out: Buffer[] = [];
  let pageToken = "";
  do {
    const page = await cx.getTranscript({ session: { sessionId }, pageSize: 5000, pageToken });
    out.push(...page.entries.map((e) => Buffer.from(TranscriptEntry.encode(e).finish())));
    pageToken = page.nextPageToken;
  } while (pageToken);
  return out;
}

/** Every entry of a session as a store holds it, encoded. */
async function storedTranscript(store: ContextdStore, sessionId: string): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for (let after = 0; ;) {
    const page = await store.readEntries(sessionId, after, 1000);
    if (page.length === 0) return out;
    out.push(...page.map((e) => Buffer.from(TranscriptEntry.encode(e).finish())));
    after = page[page.length - 1].seq;
  }
}

const WRITERS = 6;
/** Messages per append: a consistent snapshot holds whole appends only. */
const BATCH = 3;

/**
 * Appends from WRITERS concurrent runtimes (one session each), batch after batch, until `stop`;
 * resolves with the batches each wrote.
 */
async function appendLoad(cx: ContextdClient, stop: AbortSignal): Promise<number[]> {
  return Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      let batches = 0;
      while (!stop.aborted) {
        const messages = Array.from({ length: BATCH }, (_, i) => user(`writer ${w} batch ${batches} message ${i} ${"filler ".repeat(40)}`));
        await cx.appendMessages({ session: { sessionId: `load-${w}`, agentId: `agent-${w % 2}` }, messages });
        batches++;
      }
      return batches;
    }),
  );
}

describe("contextctl backup and restore", () => {
  it("a backup taken under append load restores, into SQLite and PostgreSQL, to whole appends that are each session's transcript up to a point", async () => {
    const cd: ContextdProcess = await startContextd();
    cleanup.push(() => cd.cleanup());
    const cx = new ContextdClient({ address: cd.address });
    cleanup.push(() => cx.close());
    const storeFile = join(cd.dataDir, "contextd.db");
    const dir = tempDir();
    const backupFile = join(dir, "backup.db");

    // The load runs before, during and after the backup.
    const stop = new AbortController();
    const load = appendLoad(cx, stop.signal);
    await expect.poll(async () => (await cx.listSessions({})).sessions.filter((s) => s.messageCount >= 30).length, { timeout: 30_000 }).toBe(WRITERS);
    const backup = await run(["--json", "backup", "--store", `sqlite:${storeFile}`, backupFile]);
    // Keep appending a while after the backup, so the live store is ahead of it.
    const atBackup = await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => (await cx.getSession({ session: { sessionId: `load-${w}` } })).info!.entryCount),
    );
    await expect
      .poll(async () => {
        const counts = await Promise.all(
          Array.from({ length: WRITERS }, async (_, w) => (await cx.getSession({ session: { sessionId: `load-${w}` } })).info!.entryCount),
        );
        return counts.every((c, w) => c > atBackup[w]);
      })
      .toBe(true);
    stop.abort();
    const batches = await load;
    expect(backup.stderr).toBe("");
    expect(backup.code).toBe(0);
    expect(JSON.parse(backup.stdout)).toMatchObject({ ok: true, file: backupFile });
    // The search index is not part of a backup.
    expect(existsSync(`${backupFile}-search`)).toBe(false);

    const live = new Map<string, Buffer[]>();
    for (let w = 0; w < WRITERS; w++) live.set(`load-${w}`, await liveTranscript(cx, `load-${w}`));
    live.forEach((entries, id) => expect(entries.length, id).toBe(batches[Number(id.slice(5))] * BATCH));

    const pg = await createScratchDatabase();
    cleanup.push(() => pg.drop());
    for (const target of [`sqlite:${join(dir, "restored.db")}`, pg.url()]) {
      const restore = await run(["--json", "restore", backupFile, "--store", target]);
      expect(restore.stderr, target).toBe("");
      expect(restore.code, target).toBe(0);
      const store = await opened(target);
      expect((await store.countRows()).sessions).toBe(WRITERS);
      for (const [id, entries] of live) {
        const restored = await storedTranscript(store, id);
        // A snapshot: whole appends, and exactly the live transcript's first entries, byte for byte.
        expect(restored.length % BATCH, `${target} ${id}`).toBe(0);
        expect(restored.length, `${target} ${id}`).toBeGreaterThanOrEqual(30);
        expect(restored.length, `${target} ${id}`).toBeLessThan(entries.length);
        expect(restored, `${target} ${id}`).toEqual(entries.slice(0, restored.length));
        const record = await store.getSession(id);
        expect(record?.entryCount).toBe(restored.length);
        expect(record?.storedBytes).toBe(restored.reduce((sum, e) => sum + e.length, 0));
      }
      // The restore is in the restored store's audit trail.
      const audit = await store.listAudit({ sinceMs: 0, untilMs: 0, actor: "", action: "store.restore", beforeId: 0, limit: 10 });
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({ action: "store.restore", target: `backup ${backupFile}`, outcome: "OK" });
      expect(audit[0].actor).toMatch(/^contextctl/);
    }
    await cd.stop();
  });

  it("restore refuses a store that holds anything, and writes nothing to it", async () => {
    const dir = tempDir();
    const source = await opened(`sqlite:${join(dir, "source.db")}`);
    await source.appendMessages("s-1", [{ message: user("kept"), tokenCount: 1 }], { sessionKey: "", agentId: "main" });
    await source.close();
    cleanup.pop();
    const backupFile = join(dir, "backup.db");
    expect((await run(["backup", "--store", `sqlite:${join(dir, "source.db")}`, backupFile])).code).toBe(0);

    const target = `sqlite:${join(dir, "busy.db")}`;
    const busy = await opened(target);
    await busy.appendMessages("other", [{ message: user("already here"), tokenCount: 2 }], { sessionKey: "", agentId: "main" });
    const before = await busy.countRows();
    const refused = await run(["restore", backupFile, "--store", target]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/contextctl: restore: SQLite store .* is not empty \(1 sessions, 1 entries\); copy into an empty store/);
    expect(await busy.countRows()).toEqual(before);
    expect(await busy.getSession("s-1")).toBeUndefined();
  });

  it("backup refuses to overwrite a file, and names the pg_dump recipe for a PostgreSQL store", async () => {
    const dir = tempDir();
    const store = join(dir, "store.db");
    const s = await openStore(`sqlite:${store}`);
    await s.close();
    const file = join(dir, "backup.db");
    expect((await run(["backup", "--store", `sqlite:${store}`, file])).code).toBe(0);
    const again = await run(["backup", "--store", `sqlite:${store}`, file]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("exists already");
    const pg = await run(["backup", "--store", "postgres://postgres@127.0.0.1:5432/contextd", join(dir, "pg.db")]);
    expect(pg.code).toBe(1);
    expect(pg.stderr).toContain("pg_dump --format=custom");
  });
});
