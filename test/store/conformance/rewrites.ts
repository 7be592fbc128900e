import { describe, expect, it, vi } from "vitest";

import { InvalidArgumentError, NotFoundError } from "../../../src/contract/errors.js";
import { CompactionEntry, Role, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../../src/contract/messages.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import { LABELS, messageOf, msg, type Stores } from "./harness.js";

/** Five messages m1..m5 with 10, 20, 30, 40, 50 tokens. */
async function seed(store: ContextdStore, sessionId = "s1"): Promise<TranscriptEntry[]> {
  return store.appendMessages(
    sessionId,
    [1, 2, 3, 4, 5].map((i) => msg(`m${i} ${"x".repeat(100)}`, i * 10, i % 2 ? Role.ROLE_USER : Role.ROLE_ASSISTANT)),
    LABELS,
  );
}

/** rewriteEntries and readEntryRevisions (HostService.RewriteTranscriptEntries). */
export function describeRewrites(stores: Stores): void {
  describe("rewriteEntries", () => {
    it("replaces content, revision and token counts, and the active view and totals follow", async () => {
      const store = await stores.open();
      const e = await seed(store);
      const c = await store.commitCompaction("s1", CompactionEntry.fromPartial({ summary: "sum", firstKeptEntryId: e[1].id }), "", 7);
      const before = (await store.getSession("s1"))!;
      expect(before.totalTokens).toBe(150);

      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(before.updatedAtMs + 1000);
      const out = await store.rewriteEntries(
        "s1",
        [
          // The caller's id, token count and timestamp on the message are overridden.
          { entryId: e[1].id, message: textMessage(Role.ROLE_ASSISTANT, "short", { id: "bogus", tokenCount: 999, timestampMs: 1 }), tokenCount: 3 },
          { entryId: e[3].id, message: textMessage(Role.ROLE_ASSISTANT, `long ${"y".repeat(400)}`), tokenCount: 90 },
        ],
        "trim tool output",
      );
      expect(out.rewrittenEntries).toBe(2);
      // One payload shrank by ~100 bytes, the other grew by ~300: the net is negative, reported as 0.
      expect(out.bytesFreed).toBe(0);

      const entries = await store.readEntries("s1", 0, 100);
      expect(entries.length).toBe(6);
      const r1 = entries[1];
      expect(r1).toMatchObject({ id: e[1].id, seq: 2, parentId: e[0].id, timestampMs: e[1].timestampMs, revision: 1 });
      expect(messageOf(r1)).toMatchObject({ id: e[1].id, tokenCount: 3, timestampMs: e[1].timestampMs, role: Role.ROLE_ASSISTANT });
      expect(messageText(messageOf(r1))).toBe("short");
      expect(entries[3]).toMatchObject({ id: e[3].id, seq: 4, parentId: e[2].id, revision: 1 });
      expect(messageOf(entries[3]).tokenCount).toBe(90);
      // Untouched entries and the compaction are unchanged.
      expect([entries[0], entries[2], entries[4], entries[5]]).toEqual([e[0], e[2], e[4], c]);

      const session = (await store.getSession("s1"))!;
      expect(session.totalTokens).toBe(150 - 20 + 3 - 40 + 90);
      expect(session).toMatchObject({ entryCount: 6, messageCount: 5, lastSeq: 6, latestCompactionId: c.id });
      expect(session.updatedAtMs).toBe(before.updatedAtMs + 1000);

      const view = (await store.readActiveView("s1"))!;
      expect(view.messages.map((m) => [m.entryId, m.tokenCount, m.message.id, m.message.tokenCount])).toEqual([
        [e[1].id, 3, e[1].id, 3],
        [e[2].id, 30, e[2].id, 30],
        [e[3].id, 90, e[3].id, 90],
        [e[4].id, 50, e[4].id, 50],
      ]);
      expect(messageText(view.messages[0].message)).toBe("short");
      expect(view.tokens).toBe(7 + 3 + 30 + 90 + 50);
      expect((await store.readActiveTotals("s1"))!.tokens).toBe(view.tokens);

      // A shrinking rewrite reports what it freed.
      const shrink = await store.rewriteEntries("s1", [{ entryId: e[4].id, message: textMessage(Role.ROLE_USER, "m5"), tokenCount: 1 }], "");
      const size = (x: TranscriptEntry) => TranscriptEntry.encode(x).finish().length;
      expect(shrink).toEqual({ rewrittenEntries: 1, bytesFreed: size(e[4]) - size((await store.readEntries("s1", 4, 1))[0]) });
      expect(shrink.bytesFreed).toBeGreaterThan(90);

      // Survives a reopen.
      await store.close();
      const again = await stores.open();
      expect(messageText((await again.readActiveView("s1"))!.messages[0].message)).toBe("short");
      expect((await again.getSession("s1"))!.totalTokens).toBe(150 - 20 + 3 - 40 + 90 - 50 + 1);
    });

    it("keeps every previous revision, readable oldest first, with its token count", async () => {
      const store = await stores.open();
      const e = await seed(store);
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(10_000);
      await store.rewriteEntries("s1", [{ entryId: e[2].id, message: textMessage(Role.ROLE_USER, "v1"), tokenCount: 5 }], "first");
      vi.setSystemTime(20_000);
      await store.rewriteEntries("s1", [{ entryId: e[2].id, message: textMessage(Role.ROLE_USER, "v2"), tokenCount: 2 }], "second");

      const revisions = await store.readEntryRevisions("s1", e[2].id);
      expect(revisions.length).toBe(2);
      expect(revisions[0]).toEqual({ entry: e[2], replacedAtMs: 10_000, reason: "first" });
      expect(revisions[1].replacedAtMs).toBe(20_000);
      expect(revisions[1].reason).toBe("second");
      expect(revisions[1].entry).toMatchObject({ id: e[2].id, seq: 3, revision: 1 });
      expect(messageOf(revisions[1].entry)).toMatchObject({ id: e[2].id, tokenCount: 5 });
      expect(messageText(messageOf(revisions[1].entry))).toBe("v1");

      const live = (await store.readEntries("s1", 2, 1))[0];
      expect(live.revision).toBe(2);
      expect(messageText(messageOf(live))).toBe("v2");
      expect((await store.getSession("s1"))!.totalTokens).toBe(150 - 30 + 2);

      // The previous token counts are kept with each revision.
      expect((await store.readRawRevisions("s1", null, 10)).map((r) => [r.entryId, r.revision, r.tokenCount, r.reason])).toEqual([
        [e[2].id, 0, 30, "first"],
        [e[2].id, 1, 5, "second"],
      ]);

      // Never rewritten → []; unknown entry or session → NotFound.
      expect(await store.readEntryRevisions("s1", e[0].id)).toEqual([]);
      await expect(store.readEntryRevisions("s1", "nope")).rejects.toThrow(NotFoundError);
      await expect(store.readEntryRevisions("ghost", e[2].id)).rejects.toThrow(NotFoundError);

      // Deleting the session deletes its revisions too.
      expect(await store.deleteSession("s1")).toBe(true);
      expect((await store.countRows()).entryRevisions).toBe(0);
    });

    it("is all-or-nothing: one bad id rewrites nothing and is named", async () => {
      const store = await stores.open();
      const e = await seed(store);
      const other = await seed(store, "s2");
      const c = await store.commitCompaction("s1", CompactionEntry.fromPartial({ summary: "s", firstKeptEntryId: e[3].id }), "", 4);
      const entries = await store.readEntries("s1", 0, 100);
      const session = await store.getSession("s1");
      const good = { entryId: e[0].id, message: textMessage(Role.ROLE_USER, "new"), tokenCount: 1 };

      for (const bad of ["missing-id", other[0].id, c.id]) {
        const err = await store
          .rewriteEntries("s1", [good, { entryId: bad, message: textMessage(Role.ROLE_USER, "x"), tokenCount: 1 }, { ...good, entryId: e[1].id }], "r")
          .catch((x: unknown) => x);
        expect(err).toBeInstanceOf(InvalidArgumentError);
        expect((err as Error).message).toContain(bad);
      }
      // A bad token count or a message that cannot be encoded, after a good rewrite.
      await expect(store.rewriteEntries("s1", [good, { ...good, entryId: e[1].id, tokenCount: -1 }], "r")).rejects.toThrow(InvalidArgumentError);
      await expect(store.rewriteEntries("s1", [good, { entryId: e[1].id, message: textMessage(1.5 as Role, "x"), tokenCount: 1 }], "r")).rejects.toThrow(
        new RegExp(e[1].id),
      );
      // The same id twice; a missing id.
      await expect(store.rewriteEntries("s1", [good, good], "r")).rejects.toThrow(/more than once/);
      await expect(store.rewriteEntries("s1", [good, { ...good, entryId: "" }], "r")).rejects.toThrow("rewrite 1: entry_id is required");

      expect(await store.readEntries("s1", 0, 100)).toEqual(entries);
      expect(await store.getSession("s1")).toEqual(session);
      expect(await store.readEntryRevisions("s1", e[0].id)).toEqual([]);
      expect(await store.readEntries("s2", 0, 100)).toEqual(other);
    });

    it("throws NotFound for an unknown session; an empty list writes nothing", async () => {
      const store = await stores.open();
      const e = await seed(store);
      await expect(store.rewriteEntries("ghost", [{ entryId: e[0].id, message: textMessage(Role.ROLE_USER, "x"), tokenCount: 1 }], "r")).rejects.toThrow(
        NotFoundError,
      );
      await expect(store.rewriteEntries("ghost", [], "r")).rejects.toThrow(NotFoundError);
      expect(await store.getSession("ghost")).toBeUndefined();
      const session = await store.getSession("s1");
      expect(await store.rewriteEntries("s1", [], "r")).toEqual({ rewrittenEntries: 0, bytesFreed: 0 });
      expect(await store.getSession("s1")).toEqual(session);
    });
  });
}
