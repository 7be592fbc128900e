import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { describe, expect, it } from "vitest";

import { AlreadyExistsError, InvalidArgumentError, ResourceExhaustedError } from "../../../src/contract/errors.js";
import { CompactionEntry, Role, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../../src/contract/messages.js";
import { TranscriptImports } from "../../../src/host/import-transcript.js";
import { pageKey } from "../../../src/host/page-token.js";
import { agentScope } from "../../../src/host/runtime-access.js";
import { resolveSession } from "../../../src/host/session-visibility.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import type { ImportedTranscript } from "../../../src/store/types.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import { LABELS, msg, texts, type Stores } from "./harness.js";

const FIXTURES = resolve(import.meta.dirname, "../../fixtures/openclaw");
export const SAMPLES = { v4: readFileSync(join(FIXTURES, "sample-v4.jsonl"), "utf8"), v3: readFileSync(join(FIXTURES, "sample-v3.jsonl"), "utf8") };
const fileLines = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** Imports an OpenClaw session file through the host's real importer (which plans it) into `store`. */
export async function importSample(store: ContextdStore, sessionId: string, file: string): Promise<void> {
  const imports = new TranscriptImports(store, createTokenizer("o200k_base"), {
    maxMessageBytes: 4 << 20,
    maxMessagesPerAppend: 1000,
    maxSessionEntries: 1_000_000,
    maxImportBytes: 16 << 20,
  });
  const session = { sessionId, sessionKey: "", agentId: "main" };
  // As SessionService's session step admits it for a runtime that may act for every agent.
  const anyAgent = { checkAgent: () => undefined, mayActFor: () => true, agents: agentScope(["*"]), pageKey: pageKey(undefined) };
  await imports.importTranscript({ session, jsonl: Buffer.from(file) }, await resolveSession(store, anyAgent, session, "session", "create"));
}

function entry(id: string, parentId: string, text: string, extra: Partial<TranscriptEntry> = {}): { entry: TranscriptEntry; tokenCount: number } {
  return {
    entry: TranscriptEntry.fromPartial({ id, parentId, timestampMs: 1000, entry: { $case: "message", value: textMessage(Role.ROLE_USER, text) }, ...extra }),
    tokenCount: text.length,
  };
}

/** appendIdempotent (AppendMessages.idempotency_key) and importSession (ImportTranscript). */
export function describeKeysAndImports(stores: Stores): void {
  describe("idempotency keys", () => {
    const KEY = { key: "req-1", requestHash: "hash-a" };

    it("writes once per key and answers a repeat with the recorded ids; another hash is refused", async () => {
      const store = await stores.open();
      const first = await store.appendIdempotent("s1", [msg("a", 3), msg("b", 4)], LABELS, KEY);
      expect(first.replayed).toBe(false);
      const ids = first.replayed ? [] : first.entries.map((e) => e.id);
      expect(await store.appendIdempotent("s1", [msg("a", 3), msg("b", 4)], LABELS, KEY)).toEqual({ replayed: true, entryIds: ids, tokenCounts: [3, 4] });
      const err = await store.appendIdempotent("s1", [msg("other", 1)], LABELS, { key: "req-1", requestHash: "hash-b" }).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(AlreadyExistsError);
      expect((err as Error).message).toContain('idempotency_key "req-1" was already used in session "s1"');
      expect((await store.getSession("s1"))!.entryCount).toBe(2);

      // Keys are scoped to the session, and die with it.
      expect((await store.appendIdempotent("s2", [msg("a", 3)], LABELS, KEY)).replayed).toBe(false);
      await store.deleteSession("s1");
      expect((await store.appendIdempotent("s1", [msg("a", 3)], LABELS, KEY)).replayed).toBe(false);
      await expect(store.appendIdempotent("s1", [msg("a", 3)], LABELS, { key: "", requestHash: "h" })).rejects.toThrow(InvalidArgumentError);
      expect((await store.readRawIdempotencyKeys("s2", "", 10)).map((k) => [k.key, k.requestHash, JSON.parse(k.tokenCountsJson)])).toEqual([
        ["req-1", "hash-a", [3]],
      ]);
    });

    it("records no key when its append fails, so a corrected retry with that key writes", async () => {
      const store = await stores.open();
      await expect(store.appendIdempotent("s1", [msg("a", 1), msg("b", 1)], LABELS, KEY, 1)).rejects.toThrow(ResourceExhaustedError);
      await expect(store.appendIdempotent("s1", [msg("a", 1), msg("bad", 1, 1.5 as Role)], LABELS, KEY)).rejects.toThrow(InvalidArgumentError);
      expect(await store.getSession("s1")).toBeUndefined();
      expect((await store.appendIdempotent("s1", [msg("a", 1)], LABELS, KEY)).replayed).toBe(false);
    });

    it("lets one of two concurrent requests with one key write and answers the other replayed", async () => {
      const [a, b] = [await stores.open(), await stores.open()];
      for (const sessionId of ["new-session", "old-session"]) {
        if (sessionId === "old-session") await a.appendMessages(sessionId, [msg("x", 1)], LABELS);
        const [r1, r2] = await Promise.all([a, b].map((s) => s.appendIdempotent(sessionId, [msg("q", 2)], LABELS, KEY)));
        expect([r1.replayed, r2.replayed].sort()).toEqual([false, true]);
        const written = r1.replayed ? r2 : r1;
        const replay = r1.replayed ? r1 : r2;
        expect(replay).toEqual({ replayed: true, entryIds: written.replayed ? [] : written.entries.map((e) => e.id), tokenCounts: [2] });
        const written_ = (await a.readEntries(sessionId, 0, 10)).filter((e) => e.entry?.$case === "message" && messageText(e.entry.value) === "q");
        expect(written_).toHaveLength(1);
      }
    });
  });

  describe("importSession", () => {
    for (const [version, file] of Object.entries(SAMPLES)) {
      it(`keeps every entry of the OpenClaw ${version} sample, hidden branches included, and appends after its leaf`, async () => {
        const store = await stores.open();
        await importSample(store, `sample-${version}`, file);
        const rows = fileLines(file);
        const entries = await store.readEntries(`sample-${version}`, 0, 1000);
        expect(entries.map((e) => e.id)).toEqual(rows.slice(1).map((r) => r.id));
        expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
        expect(entries.filter((e) => e.hidden).length).toBeGreaterThanOrEqual(4);
        const session = (await store.getSession(`sample-${version}`))!;
        expect(JSON.parse(session.headerJson)).toEqual(rows[0]);
        expect(session).toMatchObject({ entryCount: rows.length - 1, lastSeq: rows.length - 1, agentId: "main" });
        const view = (await store.readActiveView(`sample-${version}`))!;
        expect(view.compaction?.entry.id).toBe(session.latestCompactionId);
        const hidden = new Set(entries.filter((e) => e.hidden).map((e) => e.id));
        expect(view.messages.length).toBeGreaterThan(5);
        expect(view.messages.some((m) => hidden.has(m.entryId))).toBe(false);
        expect((await store.readActiveTotals(`sample-${version}`))!.tokens).toBe(view.tokens);

        const leaf = version === "v3" ? (rows.at(-1) as { targetId: string }).targetId : entries.at(-1)!.id;
        const [next] = await store.appendMessages(`sample-${version}`, [msg("And now?", 3)], LABELS);
        expect(next).toMatchObject({ seq: rows.length, parentId: leaf });
        await expect(importSample(store, `sample-${version}`, file)).rejects.toThrow(AlreadyExistsError);
      });
    }

    it("sets the active view as the plan says and refuses an inconsistent plan, writing nothing", async () => {
      const store = await stores.open();
      const plan: ImportedTranscript = {
        headerJson: '{"type":"session"}',
        entries: [
          entry("e1", "", "old"),
          entry("e2", "e1", "side", { hidden: true }),
          {
            entry: TranscriptEntry.fromPartial({
              id: "c1",
              parentId: "e1",
              timestampMs: 2000,
              entry: { $case: "compaction", value: CompactionEntry.fromPartial({ summary: "S", firstKeptEntryId: "e1" }) },
            }),
            tokenCount: 9,
          },
          entry("e3", "c1", "new"),
          entry("e4", "e3", "excluded", { hidden: true }),
        ],
        leafEntryId: "e4",
        compactionIndex: 2,
        activeFromIndex: 0,
      };
      const rec = await store.importSession("imp", LABELS, plan);
      expect(rec).toMatchObject({
        entryCount: 5,
        messageCount: 4,
        compactionCount: 1,
        totalTokens: 3 + 4 + 3 + 8,
        lastSeq: 5,
        latestCompactionId: "c1",
        headerJson: plan.headerJson,
      });
      const view = (await store.readActiveView("imp"))!;
      expect(texts(view.messages)).toEqual(["old", "new"]);
      expect(view.tokens).toBe(9 + 3 + 3);
      expect((await store.appendMessages("imp", [msg("after", 1)], LABELS))[0].parentId).toBe("e4");

      const bad: Partial<ImportedTranscript>[] = [
        { entries: [entry("x", "", "a"), entry("x", "", "b")] },
        { leafEntryId: "nowhere" },
        { compactionIndex: 0 },
        { activeFromIndex: 99 },
      ];
      for (const b of bad) await expect(store.importSession("bad", LABELS, { ...plan, ...b })).rejects.toThrow(InvalidArgumentError);
      await expect(store.importSession("imp", LABELS, plan)).rejects.toThrow(AlreadyExistsError);
      expect(await store.getSession("bad")).toBeUndefined();
    });
  });
}
