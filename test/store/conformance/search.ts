import { describe, expect, it } from "vitest";

import { copyStore } from "../../../src/cli/commands/migrate-store.js";
import { Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import { searchPage, type SearchCursor, type SearchOrderKind, type StoredHit } from "../../../src/store/search-hits.js";
import { parseQuery } from "../../../src/store/search-text.js";
import { compaction, LABELS, msg, type Stores } from "./harness.js";
import { importSample, SAMPLES } from "./keys-and-imports.js";

const OTHER = { sessionKey: "k-other", agentId: "agent-b" };

async function search(
  store: ContextdStore,
  sessionId: string,
  query: string,
  options: { agentId?: string; order?: SearchOrderKind; limit?: number; after?: SearchCursor } = {},
) {
  return searchPage(store, { sessionId, agentId: options.agentId, terms: parseQuery(query) }, options.order ?? "newest", options.limit ?? 100, options.after);
}

/** Every hit of a search, page by page; fails on a repeated hit. */
async function allPages(store: ContextdStore, sessionId: string, query: string, order: SearchOrderKind, limit: number, agentId?: string): Promise<StoredHit[]> {
  const out: StoredHit[] = [];
  let after: SearchCursor | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const page = await search(store, sessionId, query, { order, limit, after, agentId });
    expect(page.hits.length).toBeLessThanOrEqual(limit);
    out.push(...page.hits);
    if (!page.next) break;
    after = page.next;
  }
  const keys = out.map((h) => `${h.sessionId}/${h.seq}`);
  expect(new Set(keys).size).toBe(keys.length);
  return out;
}

/** searchCandidates and the shared hit paging (search-hits.ts): history search, the same on both stores. */
export function describeSearch(stores: Stores): void {
  describe("history search", () => {
    it("finds code, paths and ticket ids by their words, and marks the match in the snippet", async () => {
      const store = await stores.open();
      await store.appendMessages(
        "s1",
        [
          msg("Fix the rounding bug in src/billing/invoice_rounding.ts (ticket BILL-4821): totals are off by a cent.", 30),
          msg("Unrelated: the weather is nice.", 5, Role.ROLE_ASSISTANT),
          msg("Error: ENOENT: no such file or directory, open '/etc/contextd/Café.yaml'", 12, Role.ROLE_TOOL_RESULT, { toolCallId: "t1" }),
        ],
        LABELS,
      );
      const first = await search(store, "s1", "invoice_rounding.ts");
      expect(first.hits.map((h) => h.seq)).toEqual([1]);
      expect(first.hits[0].snippet).toContain("src/billing/«invoice_rounding.ts» (ticket");
      expect(first.hits[0].score).toBeGreaterThan(0);
      expect((await search(store, "s1", "BILL-4821")).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(store, "s1", "bill 4821")).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(store, "s1", "rounding")).hits.map((h) => h.seq)).toEqual([1]);
      // Words match whole; every term is required.
      expect((await search(store, "s1", "round")).hits).toEqual([]);
      expect((await search(store, "s1", "rounding weather")).hits).toEqual([]);
      // Case and diacritics do not matter; error strings are found.
      const err = await search(store, "s1", "ENOENT cafe.yaml");
      expect(err.hits.map((h) => [h.seq, h.role])).toEqual([[3, Role.ROLE_TOOL_RESULT]]);
      expect(err.hits[0].snippet).toBe("Error: «ENOENT»: no such file or directory, open '/etc/contextd/«Café.yaml»'");
      // A phrase must hold its words in order.
      expect((await search(store, "s1", '"totals are off"')).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(store, "s1", '"off are totals"')).hits).toEqual([]);
    });

    it("treats query syntax of FTS5 and tsquery as plain words", async () => {
      const store = await stores.open();
      await store.appendMessages("s1", [msg('use a OR b, NEAR the -flag and x* glob: don\'t "quote"', 10), msg("nothing here", 3)], LABELS);
      for (const q of ['"', '"unbalanced OR', "*", "NEAR(", "OR", "-flag", "a OR b", "x*", "don't", "'", "\\", "(", ")", "body:flag", "^x", "NOT"]) {
        let terms;
        try {
          terms = parseQuery(q);
        } catch {
          continue; // no word in it: refused before any store sees it
        }
        const page = await searchPage(store, { sessionId: "s1", terms }, "newest", 10, undefined);
        expect(
          page.hits.every((h) => h.seq === 1),
          q,
        ).toBe(true);
      }
      expect((await search(store, "s1", "OR")).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(store, "s1", "NEAR(")).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(store, "s1", "-flag")).hits.map((h) => h.seq)).toEqual([1]);
    });

    it("searches compacted entries, hidden ones and compaction summaries, and the live revision of a rewritten entry only", async () => {
      const store = await stores.open();
      const e = await store.appendMessages(
        "s1",
        [msg("planted fact: the vault code is 7731", 10), msg("second", 5, Role.ROLE_ASSISTANT), msg("third", 5), msg("fourth", 5, Role.ROLE_ASSISTANT)],
        LABELS,
      );
      await store.appendMessages("s1", [msg("excluded secret zebra", 3, Role.ROLE_USER, { excludeFromContext: true })], LABELS);
      const c = await store.commitCompaction("s1", compaction("summary mentions the vault", e[3].id), "", 9);
      const fact = await search(store, "s1", "vault code 7731");
      expect(fact.hits.map((h) => h.entryId)).toEqual([e[0].id]);
      const hidden = await search(store, "s1", "zebra");
      expect(hidden.hits).toMatchObject([{ seq: 5, hidden: true }]);
      const vault = await search(store, "s1", "vault");
      expect(vault.hits.map((h) => [h.entryId, h.compaction])).toEqual([
        [c.id, true],
        [e[0].id, false],
      ]);

      await store.rewriteEntries("s1", [{ entryId: e[0].id, message: textMessage(Role.ROLE_USER, "trimmed to a pelican"), tokenCount: 2 }], "trim");
      expect((await search(store, "s1", "7731")).hits).toEqual([]);
      expect((await search(store, "s1", "pelican")).hits.map((h) => h.entryId)).toEqual([e[0].id]);
    });

    it("a deleted session's text is gone from the index, also for a new session under its id", async () => {
      const store = await stores.open();
      await store.appendMessages("s1", [msg("doomed albatross", 3)], LABELS);
      await store.appendMessages("s2", [msg("kept albatross", 3)], LABELS);
      expect(await store.deleteSession("s1")).toBe(true);
      await store.appendMessages("s1", [msg("fresh start", 3)], LABELS);
      expect((await search(store, "s1", "albatross")).hits).toEqual([]);
      expect((await search(store, "s1", "albatross", { agentId: LABELS.agentId })).hits.map((h) => h.sessionId)).toEqual(["s2"]);
      expect((await search(store, "s1", "fresh")).hits.map((h) => h.seq)).toEqual([1]);
    });

    it("a session's search never answers another session's entries, and an agent's never another agent's", async () => {
      const store = await stores.open();
      // Created a few ms apart: NEWEST order across sessions is by creation.
      const tick = () => new Promise((r) => setTimeout(r, 5));
      await store.appendMessages("mine-1", [msg("shared word kestrel in mine-1", 3)], LABELS);
      await tick();
      await store.appendMessages("theirs", [msg("shared word kestrel in theirs", 3), msg("kestrel again", 3)], OTHER);
      await tick();
      await store.appendMessages("mine-2", [msg("kestrel in mine-2", 3)], LABELS);
      expect((await search(store, "mine-1", "kestrel")).hits.map((h) => h.sessionId)).toEqual(["mine-1"]);
      const agent = await allPages(store, "mine-1", "kestrel", "newest", 1, LABELS.agentId);
      // Newest-created session first.
      expect(agent.map((h) => h.sessionId)).toEqual(["mine-2", "mine-1"]);
      const theirs = await search(store, "theirs", "kestrel", { agentId: OTHER.agentId });
      expect(theirs.hits.map((h) => h.sessionId)).toEqual(["theirs", "theirs"]);
      expect((await search(store, "mine-1", "theirs", { agentId: LABELS.agentId })).hits).toEqual([]);
    });

    it("pages through every match once, newest first or by score, in pages of any size", async () => {
      const store = await stores.open();
      const batch = Array.from({ length: 40 }, (_, i) => msg(i % 3 === 0 ? `needle ${"needle ".repeat(i % 5)}hay ${i}` : `hay only ${i}`, 5));
      await store.appendMessages("s1", batch, LABELS);
      await store.appendMessages("s2", [msg("needle in s2", 3)], LABELS);
      const expected = batch.flatMap((_, i) => (i % 3 === 0 ? [i + 1] : [])).reverse();
      for (const limit of [1, 3, 7, 100]) {
        expect((await allPages(store, "s1", "needle", "newest", limit)).map((h) => h.seq)).toEqual(expected);
        const ranked = await allPages(store, "s1", "needle", "relevance", limit);
        expect(ranked.map((h) => h.seq).sort((a, b) => b - a)).toEqual(expected);
        for (let i = 1; i < ranked.length; i++) expect(ranked[i - 1].score).toBeGreaterThanOrEqual(ranked[i].score);
      }
      const agentWide = await allPages(store, "s1", "needle", "relevance", 4, LABELS.agentId);
      expect(agentWide.length).toBe(expected.length + 1);
    });

    it("imported sessions and copied stores are searchable", async () => {
      const store = await stores.open();
      await importSample(store, "imp", SAMPLES.v4);
      const imported = (await store.readEntries("imp", 0, 1000)).find((e) => e.entry?.$case === "message" && e.entry.value.content.length > 0);
      expect(imported).toBeDefined();
      const anyWord = /[A-Za-z]{4,}/.exec(JSON.stringify(imported!.entry))![0];
      expect((await search(store, "imp", anyWord)).hits.length).toBeGreaterThan(0);

      await store.appendMessages("s1", [msg("copied osprey", 3)], LABELS);
      const other = await stores.otherPlace();
      const target = await stores.openAt(other.url);
      await copyStore(store, target);
      expect((await search(target, "s1", "osprey")).hits.map((h) => h.seq)).toEqual([1]);
      expect((await search(target, "imp", anyWord)).hits.length).toBe((await search(store, "imp", anyWord)).hits.length);
    });

    it("reads an entry by id and the compaction before a seq", async () => {
      const store = await stores.open();
      const e = await store.appendMessages("s1", [msg("a", 1), msg("b", 1), msg("c", 1)], LABELS);
      const c1 = await store.commitCompaction("s1", compaction("one", e[1].id), "", 2);
      await store.appendMessages("s1", [msg("d", 1)], LABELS);
      const c2 = await store.commitCompaction("s1", compaction("two", ""), c1.id, 2);
      expect((await store.readEntryById("s1", e[2].id))?.seq).toBe(3);
      expect(await store.readEntryById("s1", "nope")).toBeUndefined();
      await expect(store.readEntryById("missing", "nope")).rejects.toThrow(/not found/);
      expect((await store.readPreviousCompaction("s1", c2.seq))?.id).toBe(c1.id);
      expect(await store.readPreviousCompaction("s1", c1.seq)).toBeUndefined();
    });
  });
}
