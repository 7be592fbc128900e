import { describe, expect, it } from "vitest";

import { InvalidArgumentError } from "../../../src/contract/errors.js";
import { Role, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import type { ActiveView, ImportedTranscript } from "../../../src/store/types.js";
import { compaction, LABELS, msg, texts, type Stores } from "./harness.js";

/** The ids of the view's messages split as the host shows them: pinned (before the summary), kept. */
function parts(view: ActiveView): { pinned: string[]; kept: string[] } {
  const ids = texts(view.messages);
  return { pinned: ids.slice(0, view.pinnedCount), kept: ids.slice(view.pinnedCount) };
}

const sys = (text: string, tokens: number) => msg(text, tokens, Role.ROLE_SYSTEM);

/**
 * A session "rules" (system, 7) u1 a1 "mid-rules" (system, 5) u2 a2 u3 a3, user/assistant
 * messages 10 tokens each: texts are the names.
 */
async function seedSession(store: ContextdStore, sessionId = "s1") {
  return store.appendMessages(
    sessionId,
    [
      sys("rules", 7),
      msg("u1", 10),
      msg("a1", 10, Role.ROLE_ASSISTANT),
      sys("mid-rules", 5),
      msg("u2", 10),
      msg("a2", 10, Role.ROLE_ASSISTANT),
      msg("u3", 10),
      msg("a3", 10, Role.ROLE_ASSISTANT),
    ],
    LABELS,
  );
}

/** docs/pinned-messages.md: system messages from before the cut stay in the active view. */
export function describePinned(stores: Stores): void {
  describe("pinned system messages", () => {
    it("keeps every system message from before the cut at the head of the view, in transcript order, counted in its tokens", async () => {
      const store = await stores.open();
      const e = await seedSession(store);
      let view = (await store.readActiveView("s1"))!;
      expect(view.pinnedCount).toBe(0); // no compaction yet: nothing is before a cut
      expect(view.tokens).toBe(7 + 5 + 6 * 10);

      // A cut between the two system messages: the first is pinned, the second stays in place.
      const c1 = await store.commitCompaction("s1", compaction("sum1", e[2].id), "", 20);
      view = (await store.readActiveView("s1"))!;
      expect(parts(view)).toEqual({ pinned: ["rules"], kept: ["a1", "mid-rules", "u2", "a2", "u3", "a3"] });
      expect(view.tokens).toBe(20 + 7 + 5 + 5 * 10);
      expect(view.messages[0]).toMatchObject({ entryId: e[0].id, seq: 1, tokenCount: 7 });
      expect(view.messages[0].message).toMatchObject({ id: e[0].id, tokenCount: 7, role: Role.ROLE_SYSTEM });

      // A later cut past the second: both pinned, in transcript order, the summary replaced.
      await store.commitCompaction("s1", compaction("sum2", e[6].id), c1.id, 15);
      view = (await store.readActiveView("s1"))!;
      expect(parts(view)).toEqual({ pinned: ["rules", "mid-rules"], kept: ["u3", "a3"] });
      expect(view.compaction?.summaryTokens).toBe(15);
      expect(view.tokens).toBe(15 + 7 + 5 + 2 * 10);
      const totals = (await store.readActiveTotals("s1"))!;
      expect(totals.tokens).toBe(view.tokens);
      expect(totals.tokensByRole).toEqual(
        new Map([
          [Role.ROLE_SYSTEM, 12],
          [Role.ROLE_USER, 10],
          [Role.ROLE_ASSISTANT, 10],
        ]),
      );

      // The transcript itself is unchanged: every entry once, in order.
      expect((await store.readEntries("s1", 0, 100)).map((x) => x.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });

    it("pins them when a compaction keeps nothing, and keeps messages appended afterwards after the summary", async () => {
      const store = await stores.open();
      await seedSession(store);
      await store.commitCompaction("s1", compaction("all", ""), "", 9, 8);
      await store.appendMessages("s1", [msg("u4", 3), sys("late-rules", 2)], LABELS);
      const view = (await store.readActiveView("s1"))!;
      expect(parts(view)).toEqual({ pinned: ["rules", "mid-rules"], kept: ["u4", "late-rules"] });
      expect(view.tokens).toBe(9 + 7 + 5 + 3 + 2);
      expect((await store.readActiveTotals("s1"))!.tokensByRole.get(Role.ROLE_SYSTEM)).toBe(7 + 5 + 2);
    });

    it("refuses a pinned system message as first_kept_entry_id, writing nothing", async () => {
      const store = await stores.open();
      const e = await seedSession(store);
      const c1 = await store.commitCompaction("s1", compaction("sum1", e[4].id), "", 20);
      const err = await store.commitCompaction("s1", compaction("back", e[0].id), c1.id, 5).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toBe(
        `first_kept_entry_id ${e[0].id} is a pinned system message of session s1, from before the active view's cut: ` +
          "it heads the view whatever the cut, so name the first kept entry after the summary (or none)",
      );
      // A summarized message that is not a system message is refused as before.
      await expect(store.commitCompaction("s1", compaction("back", e[1].id), c1.id, 5)).rejects.toThrow(/is not a message of session s1's active view/);
      const session = (await store.getSession("s1"))!;
      expect(session).toMatchObject({ compactionCount: 1, latestCompactionId: c1.id, lastSeq: 9 });
      // mid-rules, before the cut at u2, is pinned too; a kept entry after the cut is fine.
      await expect(store.commitCompaction("s1", compaction("back", e[3].id), c1.id, 5)).rejects.toThrow(/is a pinned system message/);
      await store.commitCompaction("s1", compaction("sum2", e[5].id), c1.id, 5);
      expect(parts((await store.readActiveView("s1"))!)).toEqual({ pinned: ["rules", "mid-rules"], kept: ["a2", "u3", "a3"] });
    });

    it("accepts a system message among the kept entries as first_kept_entry_id (it starts the kept part)", async () => {
      const store = await stores.open();
      const e = await seedSession(store);
      const c1 = await store.commitCompaction("s1", compaction("sum1", e[2].id), "", 20);
      await store.commitCompaction("s1", compaction("sum2", e[3].id), c1.id, 20);
      expect(parts((await store.readActiveView("s1"))!)).toEqual({ pinned: ["rules"], kept: ["mid-rules", "u2", "a2", "u3", "a3"] });
    });

    it("follows the entry's current role: a rewrite into or out of a system message pins or unpins it", async () => {
      const store = await stores.open();
      const e = await seedSession(store);
      await store.commitCompaction("s1", compaction("sum", e[6].id), "", 20);
      await store.rewriteEntries(
        "s1",
        [
          { entryId: e[0].id, message: textMessage(Role.ROLE_USER, "rules, now a user message"), tokenCount: 9 },
          { entryId: e[1].id, message: textMessage(Role.ROLE_SYSTEM, "u1, now a system message"), tokenCount: 4 },
        ],
        "test",
      );
      const view = (await store.readActiveView("s1"))!;
      expect(parts(view)).toEqual({ pinned: ["u1, now a system message", "mid-rules"], kept: ["u3", "a3"] });
      expect(view.tokens).toBe(20 + 4 + 5 + 20);
      expect((await store.readActiveTotals("s1"))!.tokens).toBe(view.tokens);
    });

    it("never pins hidden system messages (abandoned branches of an imported file)", async () => {
      const store = await stores.open();
      const entry = (id: string, parentId: string, role: Role, text: string, hidden = false) => ({
        entry: TranscriptEntry.fromPartial({ id, parentId, timestampMs: 1000, hidden, entry: { $case: "message", value: textMessage(role, text) } }),
        tokenCount: 3,
      });
      const plan: ImportedTranscript = {
        headerJson: "",
        entries: [
          entry("e1", "", Role.ROLE_SYSTEM, "visible-rules"),
          entry("e2", "e1", Role.ROLE_SYSTEM, "abandoned-rules", true),
          entry("e3", "e1", Role.ROLE_USER, "u1"),
          {
            entry: TranscriptEntry.fromPartial({
              id: "c1",
              parentId: "e3",
              timestampMs: 1000,
              entry: { $case: "compaction", value: compaction("imported", "e4") },
            }),
            tokenCount: 4,
          },
          entry("e4", "c1", Role.ROLE_USER, "u2"),
        ],
        leafEntryId: "e4",
        compactionIndex: 3,
        activeFromIndex: 4,
      };
      await store.importSession("imp", LABELS, plan);
      const view = (await store.readActiveView("imp"))!;
      expect(parts(view)).toEqual({ pinned: ["visible-rules"], kept: ["u2"] });
      expect((await store.readActiveTotals("imp"))!.tokens).toBe(view.tokens);
    });

    it("pins the system messages of a seeded session from before its seeded compaction's first kept entry", async () => {
      const store = await stores.open();
      await store.createSession("child", LABELS, [
        { kind: "message", message: textMessage(Role.ROLE_SYSTEM, "rules"), tokenCount: 7 },
        { kind: "message", message: textMessage(Role.ROLE_USER, "old"), tokenCount: 10 },
        { kind: "message", message: textMessage(Role.ROLE_USER, "kept"), tokenCount: 10 },
        { kind: "compaction", compaction: compaction("seeded", ""), firstKeptIndex: 2, summaryTokens: 5 },
      ]);
      const view = (await store.readActiveView("child"))!;
      expect(parts(view)).toEqual({ pinned: ["rules"], kept: ["kept"] });
      expect(view.tokens).toBe(5 + 7 + 10);
    });

    it("stays correct on a long session: a few system messages among thousands of entries, many compactions", async () => {
      const store = await stores.open();
      const batch = Array.from({ length: 3000 }, (_, i) =>
        i % 1000 === 0 ? sys(`rules-${i}`, 3) : msg(`m${i}`, 1, i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER),
      );
      const e = await store.appendMessages("long", batch, LABELS);
      let latest = "";
      for (const at of [500, 1500, 2500, 2990]) latest = (await store.commitCompaction("long", compaction(`to ${at}`, e[at].id), latest, 2)).id;
      const view = (await store.readActiveView("long"))!;
      expect(parts(view).pinned).toEqual(["rules-0", "rules-1000", "rules-2000"]);
      expect(view.messages.length).toBe(3 + 10);
      expect(view.tokens).toBe(2 + 3 * 3 + 10);
      expect((await store.readActiveTotals("long"))!.tokens).toBe(view.tokens);
    });
  });
}
