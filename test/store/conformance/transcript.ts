import { NO_ROWS } from "../../../src/store/store-copy.js";
import { describe, expect, it, vi } from "vitest";

import { AlreadyExistsError, ConflictError, InvalidArgumentError, NotFoundError, ResourceExhaustedError } from "../../../src/contract/errors.js";
import { Role, type CompactionEntry, type Message, type TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../../src/contract/messages.js";
import { appendN, compaction, LABELS, msg, texts, type Stores } from "./harness.js";

/** Appends, the active view, compactions, seeded sessions, paging, listing, deletion, durability. */
export function describeTranscripts(stores: Stores): void {
  describe("transcripts", () => {
    it("appends and reads back messages with ids, parents, seqs and token counts", async () => {
      const store = await stores.open();
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
        expect((e.entry?.value as Message).id).toBe(e.id);
      }
      expect(first.map((e) => (e.entry?.value as Message).tokenCount)).toEqual([5, 7, 3]);
      expect(first[0].timestampMs).toBeGreaterThanOrEqual(before);
      expect(first[2].timestampMs).toBe(1234);
      expect((first[2].entry?.value as Message).timestampMs).toBe(1234);

      // A second append continues the chain; the labels of an existing session do not change.
      const second = await store.appendMessages("s1", [msg("more", 11)], { sessionKey: "other", agentId: "other" });
      expect(second[0].seq).toBe(4);
      expect(second[0].parentId).toBe(first[2].id);

      expect(await store.getSession("s1")).toMatchObject({
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
        headerJson: "",
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
      expect(await store.readActiveTotals("missing")).toBeUndefined();
      expect(await store.getSession("missing")).toBeUndefined();
    });

    it("creates the session on an empty append, and writes nothing when a message cannot be encoded", async () => {
      const store = await stores.open();
      expect(await store.appendMessages("empty", [], LABELS)).toEqual([]);
      expect(await store.getSession("empty")).toMatchObject({ entryCount: 0, lastSeq: 0, agentId: "agent-a" });
      await appendN(store, "s1", 2);
      const bad = msg("bad", 1, 1.5 as Role); // int32 encoding rejects a non-integer role
      await expect(store.appendMessages("s1", [msg("ok", 1), bad, msg("ok2", 1)], LABELS)).rejects.toThrow(InvalidArgumentError);
      expect((await store.readEntries("s1", 0, 100)).length).toBe(2);
      expect(await store.getSession("s1")).toMatchObject({ entryCount: 2, lastSeq: 2, totalTokens: 11 + 12 });

      // The session a failed first append would have created does not exist either.
      await expect(store.appendMessages("s2", [msg("ok", 1), bad], LABELS)).rejects.toThrow(InvalidArgumentError);
      expect(await store.getSession("s2")).toBeUndefined();
      await expect(store.appendMessages("s2", [msg("ok", 1), msg("neg", -1)], LABELS)).rejects.toThrow(/token count/);
      expect(await store.getSession("s2")).toBeUndefined();
      await expect(store.appendMessages("", [msg("x", 1)], LABELS)).rejects.toThrow("session_id is required");
    });

    it("moves the active view with one and then two compactions", async () => {
      const store = await stores.open();
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
      const totals = (await store.readActiveTotals("s1"))!;
      expect(totals).toMatchObject({ summaryTokens: 50, tokens: view.tokens, session: view.session });
      expect(totals.tokensByRole).toEqual(
        new Map([
          [Role.ROLE_ASSISTANT, 14 + 16],
          [Role.ROLE_USER, 15],
        ]),
      );

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
      expect((await store.readActiveTotals("s1"))!.tokens).toBe(5 + 19);

      // History is never removed.
      expect((await store.readEntries("s1", 0, 100)).map((x) => x.entry?.$case)).toEqual([
        ...Array(6).fill("message"),
        "compaction",
        "message",
        "message",
        "compaction",
        "compaction",
        "message",
      ]);
    });

    it("keeps messages appended while a keep-nothing compaction ran in the active view", async () => {
      const store = await stores.open();
      await store.appendMessages("s", [msg("old 1", 5), msg("old 2", 5)], LABELS);
      const view = (await store.readActiveView("s"))!;
      // While an engine compacts `view`, the runtime appends a new question.
      await store.appendMessages("s", [msg("NEW QUESTION", 7)], LABELS);
      await store.commitCompaction("s", compaction("old stuff", ""), view.session.latestCompactionId, 3, view.session.lastSeq);
      const after = (await store.readActiveView("s"))!;
      expect(after.messages.map((m) => messageText(m.message))).toEqual(["NEW QUESTION"]);
      expect(after.tokens).toBe(3 + 7);
    });

    it("rejects a stale expected compaction id with ConflictError and writes nothing", async () => {
      const store = await stores.open();
      const e = await appendN(store, "s1", 4);
      const c1 = await store.commitCompaction("s1", compaction("sum1", e[2].id), "", 20);
      const err = await store.commitCompaction("s1", compaction("late", e[3].id), "", 10).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(ConflictError);
      expect((err as Error).message).toContain(c1.id);
      expect((err as Error).message).toContain('""');
      await expect(store.commitCompaction("s1", compaction("late", e[3].id), "0123456789abcdef", 10)).rejects.toThrow(/0123456789abcdef/);
      expect((await store.readEntries("s1", 0, 100)).length).toBe(5);
      const view = (await store.readActiveView("s1"))!;
      expect(view.compaction?.entry.id).toBe(c1.id);
      expect(view.session.compactionCount).toBe(1);
    });

    it("commits exactly one of two concurrent compactions that expect the same latest compaction", async () => {
      const a = await stores.open();
      const b = await stores.open();
      const e = await appendN(a, "s1", 6);
      const results = await Promise.allSettled([
        a.commitCompaction("s1", compaction("from a", e[3].id), "", 5),
        b.commitCompaction("s1", compaction("from b", e[4].id), "", 6),
      ]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect((results.find((r) => r.status === "rejected") as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
      const view = (await b.readActiveView("s1"))!;
      expect(view.session).toMatchObject({ compactionCount: 1, entryCount: 7, lastSeq: 7 });
    });

    it("rejects a first_kept_entry_id outside the active view", async () => {
      const store = await stores.open();
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
      const store = await stores.open();
      const rec = await store.createSession("child", { ...LABELS, parentSessionId: "parent" }, [
        { kind: "message", message: textMessage(Role.ROLE_USER, "a"), tokenCount: 1 },
        { kind: "message", message: textMessage(Role.ROLE_ASSISTANT, "b"), tokenCount: 2 },
        { kind: "message", message: textMessage(Role.ROLE_USER, "c"), tokenCount: 3 },
        { kind: "compaction", compaction: compaction("seed summary", "ignored"), firstKeptIndex: 1, summaryTokens: 9 },
        { kind: "message", message: textMessage(Role.ROLE_USER, "d"), tokenCount: 4 },
      ]);
      expect(rec).toMatchObject({ parentSessionId: "parent", entryCount: 5, messageCount: 4, compactionCount: 1, totalTokens: 10, lastSeq: 5 });
      expect(await store.getSession("child")).toEqual(rec);
      const entries = await store.readEntries("child", 0, 10);
      expect(entries.map((x) => x.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(entries.map((x) => x.parentId)).toEqual(["", ...entries.slice(0, 4).map((x) => x.id)]);
      expect((entries[3].entry?.value as CompactionEntry).firstKeptEntryId).toBe(entries[1].id);
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
      const store = await stores.open();
      const e = await appendN(store, "s1", 12);
      const c = await store.commitCompaction("s1", compaction("s", e[8].id), "", 3);
      const rest = await appendN(store, "s1", 12, 13);
      const pages: TranscriptEntry[][] = [];
      for (let after = 0; ;) {
        const page = await store.readEntries("s1", after, 10);
        if (page.length === 0) break;
        pages.push(page);
        after = page[page.length - 1].seq;
      }
      expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
      expect(pages.flat()).toEqual([...e, c, ...rest]);
      expect(await store.readEntries("s1", 25, 10)).toEqual([]);
      expect((await store.readEntries("s1", -5, 0)).length).toBe(25); // non-positive limit: 1000
      await expect(store.readEntries("ghost", 0, 10)).rejects.toThrow(NotFoundError);
    });

    it("lists sessions by most recent activity with an opaque cursor", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const store = await stores.open();
      const times: Record<string, number> = { a: 1000, b: 3000, c: 2000, d: 3000, e: 500, f: 3000, g: 2500, B: 3000 };
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
      // Ties by id in code point order ("B" before "b"), whatever the database's collation.
      expect(seen).toEqual(["a", "B", "b", "d", "f", "g", "c", "e"]);
      expect((await store.listSessions(100)).nextCursor).toBe("");
      expect((await store.listSessions(0)).sessions.length).toBe(8);
      expect((await store.getSession("a"))?.updatedAtMs).toBe(4000);
      expect((await store.getSession("a"))?.createdAtMs).toBe(1000);
      await expect(store.listSessions(3, "garbage")).rejects.toThrow(InvalidArgumentError);
    });

    it("lists only the sessions of the agents asked for, paging within them", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const store = await stores.open();
      const agents: Record<string, string> = { s1: "alice", s2: "bob", s3: "team-red", s4: "alice", s5: "team", s6: "alice2", s7: "bob" };
      let t = 1000;
      for (const [id, agentId] of Object.entries(agents)) {
        vi.setSystemTime((t += 1000));
        await store.appendMessages(id, [msg("x", 1)], { sessionKey: "", agentId });
      }
      const list = async (scope: { exact: string[]; prefixes: string[] }) => {
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.listSessions(1, cursor, scope);
          seen.push(...page.sessions.map((s) => s.sessionId));
          cursor = page.nextCursor;
        } while (cursor);
        return seen;
      };
      expect(await list({ exact: ["alice"], prefixes: [] })).toEqual(["s4", "s1"]);
      expect(await list({ exact: ["bob"], prefixes: ["team-"] })).toEqual(["s7", "s3", "s2"]);
      expect(await list({ exact: [], prefixes: ["alice"] })).toEqual(["s6", "s4", "s1"]);
      expect(await list({ exact: [], prefixes: [""] })).toHaveLength(7);
      expect(await list({ exact: [], prefixes: [] })).toEqual([]);
      // Wildcard characters of SQL are plain characters in a prefix.
      expect(await list({ exact: [], prefixes: ["%"] })).toEqual([]);
    });

    it("deletes sessions with everything of theirs, and records system addition tokens", async () => {
      const store = await stores.open();
      const e = await appendN(store, "s1", 3);
      await store.appendIdempotent("s1", [msg("keyed", 1)], LABELS, { key: "k", requestHash: "h" });
      await store.rewriteEntries("s1", [{ entryId: e[0].id, message: textMessage(Role.ROLE_USER, "x"), tokenCount: 1 }], "r");
      const updated = (await store.getSession("s1"))!.updatedAtMs;
      await store.setSystemAdditionTokens("s1", 42);
      expect(await store.getSession("s1")).toMatchObject({ systemAdditionTokens: 42, updatedAtMs: updated });
      await expect(store.setSystemAdditionTokens("ghost", 1)).rejects.toThrow(NotFoundError);
      await expect(store.setSystemAdditionTokens("s1", -1)).rejects.toThrow(InvalidArgumentError);
      expect(await store.deleteSession("s1")).toBe(true);
      expect(await store.deleteSession("s1")).toBe(false);
      expect(await store.getSession("s1")).toBeUndefined();
      expect(await store.readActiveView("s1")).toBeUndefined();
      expect(await store.countRows()).toEqual(NO_ROWS);
      // The id is free again: a new session with an empty history.
      expect((await appendN(store, "s1", 1))[0].seq).toBe(1);
    });

    it("sees everything after a reopen, and an acknowledged write from another connection without one", async () => {
      const store = await stores.open();
      const e = await appendN(store, "s1", 5);
      await store.commitCompaction("s1", compaction("s", e[2].id), "", 7);
      await store.setSystemAdditionTokens("s1", 3);
      const entries = await store.readEntries("s1", 0, 100);
      const view = await store.readActiveView("s1");
      const reader = await stores.open(); // a second connection; the writer stays open
      expect(await reader.readEntries("s1", 0, 100)).toEqual(entries);
      const more = await appendN(reader, "s1", 1, 6);
      expect(more[0].parentId).toBe(entries[entries.length - 1].id);
      expect((await store.readActiveView("s1"))!.messages.length).toBe(4);
      await store.close();
      await store.close(); // idempotent

      const again = await stores.open();
      expect(await again.readEntries("s1", 0, 5)).toEqual(entries.slice(0, 5));
      expect((await again.readActiveView("s1"))!.compaction).toEqual(view!.compaction);
      await again.ping();
    });

    // Appends racing each other (and compactions) to the limit: test/host/compaction-during-appends.test.ts.
    it("refuses an append that would take a session past max entries, writing nothing of it, with or without a key", async () => {
      const store = await stores.open();
      await store.appendMessages("s", [msg("a", 1), msg("b", 1)], LABELS, 5);
      await store.appendMessages("s", [msg("c", 1), msg("d", 1)], LABELS, 5);
      const refused = store.appendMessages("s", [msg("e", 1), msg("f", 1)], LABELS, 5);
      await expect(refused).rejects.toThrow(ResourceExhaustedError);
      await expect(refused).rejects.toThrow('session "s" would have 6 entries, over limits.max_session_entries (5)');
      const key = { key: "k1", requestHash: "h1" };
      await expect(store.appendIdempotent("s", [msg("e", 1), msg("f", 1)], LABELS, key, 5)).rejects.toThrow(/would have 6 entries/);
      expect((await store.getSession("s"))!.entryCount).toBe(4);
      expect(texts((await store.readActiveView("s"))!.messages)).toEqual(["a", "b", "c", "d"]);
      // The refused key was not recorded (else this other request with it would conflict), and one that fits exactly goes in.
      expect((await store.appendIdempotent("s", [msg("e", 1)], LABELS, { key: "k1", requestHash: "h2" }, 5)).replayed).toBe(false);
      expect((await store.getSession("s"))!.entryCount).toBe(5);
      // A first append over the limit creates no session.
      await expect(store.appendMessages("new", [msg("a", 1), msg("b", 1)], LABELS, 1)).rejects.toThrow(/would have 2 entries/);
      expect(await store.getSession("new")).toBeUndefined();
    });
  });
}
