import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { EngineInfo } from "../../../../src/contract/gen/contextd/v1/engine.js";
import { CompactionEntry, Role, TranscriptEntry } from "../../../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../../../src/contract/messages.js";
import { MIGRATIONS, SCHEMA_VERSION, migrate } from "../../../../src/store/sqlite/migrations.js";
import { searchPage } from "../../../../src/store/search-hits.js";
import { parseQuery } from "../../../../src/store/search-text.js";
import { SqliteStore } from "../../../../src/store/sqlite/sqlite-store.js";
import type { NewMessage, SessionLabels } from "../../../../src/store/types.js";

// SQLite only: upgrading files written by older contextd versions. What every store does is in
// test/store/conformance/ (run by sqlite-store.conformance.test.ts and test/store/postgres-conformance.test.ts).

const LABELS: SessionLabels = { sessionKey: "key-1", agentId: "agent-a" };

let dir: string;
let dbPath: string;
const open: SqliteStore[] = [];

function openAt(p = dbPath): SqliteStore {
  const s = SqliteStore.open(p);
  open.push(s);
  return s;
}

function msg(text: string, tokens: number, role = Role.ROLE_USER): NewMessage {
  return { message: textMessage(role, text), tokenCount: tokens };
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-migrations-"));
  dbPath = path.join(dir, "transcripts.db");
});

afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("schema migrations 1 → 2 → 3 → 4 → 5 → 6 → 7 → 8 → 9 → 11 → 12", () => {
  it("upgrades a version-1 file in place, keeping its data", async () => {
    // Build a version-1 file: only migration 1, then data written through its schema.
    expect(MIGRATIONS.map((m) => m.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const v1 = new Database(dbPath);
    migrate(v1, 1);
    expect(v1.pragma("user_version", { simple: true })).toBe(1);
    const tables = () => (v1.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    expect(tables()).toEqual(["entries", "sessions"]);
    const entry = TranscriptEntry.fromPartial({
      id: "00000000000000a1",
      seq: 1,
      timestampMs: 5000,
      entry: { $case: "message", value: textMessage(Role.ROLE_USER, "from v1", { id: "00000000000000a1", tokenCount: 12, timestampMs: 5000 }) },
    });
    v1.prepare(
      `INSERT INTO sessions (session_id, session_key, agent_id, created_at_ms, updated_at_ms, entry_count, message_count,
         total_tokens, last_seq, last_entry_id) VALUES ('old', 'k', 'a', 5000, 5000, 1, 1, 12, 1, '00000000000000a1')`,
    ).run();
    v1.prepare(
      `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, payload)
       VALUES ('old', 1, '00000000000000a1', '', 'message', ?, 12, 5000, ?)`,
    ).run(Role.ROLE_USER, TranscriptEntry.encode(entry).finish());
    v1.close();

    const store = openAt();
    const db = (store as unknown as { db: Database.Database }).db;
    expect(db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    expect(SCHEMA_VERSION).toBe(12);
    // Migration 6 filled in the newest message's timestamp from the entries; no key was ever given.
    expect(await store.getSession("old")).toMatchObject({
      sessionKey: "k",
      agentId: "a",
      totalTokens: 12,
      lastSeq: 1,
      lastMessageKey: "",
      lastMessageTimestampMs: 5000,
      // Migration 12 counted the bytes the session already held.
      storedBytes: TranscriptEntry.encode(entry).finish().length,
    });
    expect(await store.readEntries("old", 0, 10)).toEqual([entry]);
    const view = (await store.readActiveView("old"))!;
    expect(messageText(view.messages[0].message)).toBe("from v1");

    // The new tables work on the upgraded file.
    const appended = await store.appendMessages("old", [msg("after upgrade", 3)], LABELS);
    expect(appended[0]).toMatchObject({ seq: 2, parentId: entry.id });
    await store.rewriteEntries("old", [{ entryId: entry.id, message: textMessage(Role.ROLE_USER, "rewritten"), tokenCount: 4 }], "upgrade");
    expect((await store.readEntryRevisions("old", entry.id)).map((r) => r.entry)).toEqual([entry]);
    expect((await store.getSession("old"))!.totalTokens).toBe(4 + 3);
    // Migration 3: idempotency keys and imports work on the upgraded file.
    const keyed = await store.appendIdempotent("old", [msg("keyed", 2)], LABELS, { key: "k1", requestHash: "h" });
    expect(keyed.replayed).toBe(false);
    expect(await store.appendIdempotent("old", [msg("keyed", 2)], LABELS, { key: "k1", requestHash: "h" })).toMatchObject({ replayed: true });
    expect((await store.getSession("old"))!.headerJson).toBe("");
    // Migration 12's triggers kept the count through appends and a rewrite (its revision counts too).
    const held = db
      .prepare(
        "SELECT (SELECT sum(length(payload)) FROM entries WHERE session_id = 'old') + (SELECT sum(length(payload)) FROM entry_revisions WHERE session_id = 'old') AS b",
      )
      .get() as { b: number };
    expect((await store.getSession("old"))!.storedBytes).toBe(held.b);
    expect(await store.agentUsage("a")).toEqual({ sessions: 1, storedBytes: held.b });
    const claim = await store.claimRegistration(
      {
        engineId: "e1",
        instanceId: "localhost:1",
        locality: undefined,
        owner: "alice",
        endpoint: "localhost:1",
        info: EngineInfo.fromPartial({ id: "e1", name: "E1", protocolVersions: [1] }),
        protocolVersion: 1,
        registeredAtMs: 1,
      },
      { refresh: false },
    );
    expect(claim).toEqual({ written: true });
    expect((await store.listRegistrations()).map((r) => r.engineId)).toEqual(["e1"]);
    // Migration 4: the old session has no TTL and has not ended; new children get one and are swept.
    expect(await store.readSubagentState("old")).toEqual({ expiresAtMs: 0, endedAtMs: 0, endReason: 0 });
    await store.createSession("child", { ...LABELS, parentSessionId: "old" }, [], { expiresAtMs: 6000 });
    expect((await store.claimExpiredSubagents(6000, 10)).map((c) => c.sessionId)).toEqual(["child"]);

    // Migration 5: on the upgraded file a system message is pinned at the head of the view once a
    // compaction cuts past it.
    const after = await store.appendMessages("old", [msg("sys", 5, Role.ROLE_SYSTEM), msg("a", 5, Role.ROLE_ASSISTANT), msg("u2", 5)], LABELS);
    const sys = after[0].id;
    await store.commitCompaction("old", CompactionEntry.fromPartial({ summary: "s", firstKeptEntryId: after[2].id }), "", 3);
    const pinnedView = (await store.readActiveView("old"))!;
    expect(pinnedView.pinnedCount).toBe(1);
    expect(pinnedView.messages.map((m) => m.entryId)).toEqual([sys, after[2].id]);
    const indexes = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries' ORDER BY name").all() as { name: string }[]).map(
      (i) => i.name,
    );
    expect(indexes).toContain("entries_pinned");

    // Migration 6: message keys on the upgraded file — a keyed message is held the second time.
    const first = await store.appendKeyed("old", [{ ...msg("keyed message", 2), key: "m1" }], LABELS);
    const second = await store.appendKeyed(
      "old",
      [
        { ...msg("keyed message", 2), key: "m1" },
        { ...msg("new", 1), key: "m2" },
      ],
      LABELS,
    );
    expect(second).toMatchObject({ replayed: false, held: [0] });
    if (first.replayed || second.replayed) throw new Error("no idempotency key was given");
    expect(second.entryIds[0]).toBe(first.entryIds[0]);
    expect(indexes).toContain("entries_by_message_key");
    expect((await store.getSession("old"))!.lastMessageKey).toBe("m2");

    // Opening it again does not migrate twice.
    await store.close();
    const again = openAt();
    expect((await again.readEntryRevisions("old", entry.id)).length).toBe(1);
    expect((await again.listRegistrations()).length).toBe(1);
  });

  it("migration 7 keeps every registration as one instance named by its endpoint, and its owner's next instance is added beside it", async () => {
    const v6 = new Database(dbPath);
    migrate(v6, 6);
    const info = EngineInfo.encode(EngineInfo.fromPartial({ id: "e1", name: "E1", protocolVersions: [1] })).finish();
    v6.prepare(
      `INSERT INTO engine_registrations (engine_id, owner, endpoint, info, protocol_version, registered_at_ms) VALUES ('e1', 'alice', 'localhost:1', ?, 1, 5)`,
    ).run(info);
    v6.close();

    const store = openAt();
    expect(await store.listRegistrations()).toMatchObject([
      { engineId: "e1", instanceId: "localhost:1", owner: "alice", endpoint: "localhost:1", registeredAtMs: 5 },
    ]);
    const second = { engineId: "e1", instanceId: "pod-2", locality: { node: "n2", zone: "", replica: "" }, owner: "alice", endpoint: "localhost:2" };
    const claim = await store.claimRegistration(
      { ...second, info: EngineInfo.fromPartial({ id: "e1", name: "E1", protocolVersions: [1] }), protocolVersion: 1, registeredAtMs: 6 },
      { refresh: false },
    );
    expect(claim).toEqual({ written: true });
    expect((await store.listRegistrations()).map((r) => [r.instanceId, r.locality?.node ?? ""])).toEqual([
      ["localhost:1", ""],
      ["pod-2", "n2"],
    ]);
    expect(await store.deleteRegistration("e1", "localhost:1")).toBe(true);
    expect((await store.listRegistrations()).map((r) => r.instanceId)).toEqual(["pod-2"]);
  });

  it.each([7, 8])("a version-%i file's history is searchable once it opens (the index file is built from its entries)", async (version) => {
    const v7 = new Database(dbPath);
    migrate(v7, version);
    const entry = (seq: number, text: string) =>
      TranscriptEntry.encode(
        TranscriptEntry.fromPartial({ id: `e${seq}`, seq, entry: { $case: "message", value: textMessage(Role.ROLE_USER, text, { id: `e${seq}` }) } }),
      ).finish();
    const session = v7.prepare(
      `INSERT INTO sessions (session_id, agent_id, created_at_ms, updated_at_ms, entry_count, message_count, last_seq, last_entry_id)
       VALUES (?, ?, ?, ?, 2, 2, 2, 'e2')`,
    );
    const insert = v7.prepare(
      `INSERT INTO entries (session_id, seq, id, parent_id, kind, role, token_count, timestamp_ms, payload) VALUES (?, ?, ?, '', 'message', 1, 1, 5000, ?)`,
    );
    session.run("old-a", "agent-a", 1000, 1000);
    session.run("old-b", "agent-b", 2000, 2000);
    insert.run("old-a", 1, "e1", entry(1, "see invoice_rounding.ts for BILL-4821"));
    insert.run("old-a", 2, "e2", entry(2, "nothing"));
    insert.run("old-b", 1, "e1", entry(1, "BILL-4821 of agent b"));
    // A version-8 file numbered its sessions when they were made (and indexed them in the file itself).
    if (version === 8) v7.exec("UPDATE sessions SET search_id = rowid");
    v7.close();

    const store = openAt();
    const terms = parseQuery("BILL-4821");
    expect((await searchPage(store, { sessionId: "old-a", terms }, "newest", 10, undefined)).hits.map((h) => [h.sessionId, h.seq])).toEqual([["old-a", 1]]);
    const agentB = await searchPage(store, { sessionId: "old-b", agentId: "agent-b", terms }, "newest", 10, undefined);
    expect(agentB.hits.map((h) => h.sessionId)).toEqual(["old-b"]);
    // New sessions are numbered after the migrated ones, and searched apart from them.
    await store.appendMessages("new", [msg("BILL-4821 again", 1)], { sessionKey: "", agentId: "agent-a" });
    const agentA = await searchPage(store, { sessionId: "new", agentId: "agent-a", terms }, "newest", 10, undefined);
    expect(agentA.hits.map((h) => h.sessionId)).toEqual(["new", "old-a"]);
  });

  it("refuses a file from a newer contextd, and an unknown target version", () => {
    const db = new Database(dbPath);
    try {
      expect(() => migrate(db, 99)).toThrow(/unknown transcript store schema version 99/);
      db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
      expect(() => migrate(db)).toThrow(/newer than this contextd supports/);
    } finally {
      db.close();
    }
  });
});
