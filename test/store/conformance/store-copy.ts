import { describe, expect, it } from "vitest";

import { copyStore } from "../../../src/cli/commands/migrate-store.js";
import { FailedPreconditionError } from "../../../src/contract/errors.js";
import { Role, SubagentEndReason } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import { appendN, compaction, LABELS, msg, type Stores } from "./harness.js";
import { importSample, SAMPLES } from "./keys-and-imports.js";
import { quarantine, registration } from "./registry.js";

/** A store with something of every kind: imports, compactions, rewrites, keys, registry records. */
export async function fillStore(store: ContextdStore): Promise<void> {
  await importSample(store, "sample-v4", SAMPLES.v4);
  await importSample(store, "sample-v3", SAMPLES.v3);
  await store.appendMessages("sample-v3", [msg("continued after the import", 5)], LABELS);
  const e = await appendN(store, "chat", 8);
  const c = await store.commitCompaction("chat", compaction("first summary", e[4].id), "", 12);
  await appendN(store, "chat", 2, 9);
  await store.commitCompaction("chat", compaction("second summary", ""), c.id, 7, 8);
  await store.rewriteEntries("chat", [{ entryId: e[6].id, message: textMessage(Role.ROLE_TOOL_RESULT, "trimmed"), tokenCount: 1 }], "trim");
  await store.rewriteEntries("chat", [{ entryId: e[6].id, message: textMessage(Role.ROLE_TOOL_RESULT, "trimmed again"), tokenCount: 2 }], "again");
  await store.setSystemAdditionTokens("chat", 33);
  await store.appendIdempotent("keyed", [msg("once", 2)], LABELS, { key: "k1", requestHash: "h1" });
  await store.appendIdempotent("keyed", [msg("twice", 3)], LABELS, { key: "k2", requestHash: "h2" });
  await store.appendKeyed("keyed", [{ ...msg("by message key", 1), key: "m-1" }, msg("without one", 1)], LABELS);
  await store.appendMessages("empty", [], { sessionKey: "sk", agentId: "other", parentSessionId: "chat" });
  await store.endSubagentSession("empty", SubagentEndReason.SUBAGENT_END_REASON_COMPLETED, 1_700_000_000_500);
  await store.claimRegistration(registration("alpha", "alice"), { refresh: true });
  await store.claimRegistration(registration("beta", "bob"), { refresh: true });
  await store.saveQuarantine("beta", quarantine({ manual: true, operation: "manual", reason: "isolated" }));
}

/** Everything a store answers about its contents, through its public reads (raw rows included). */
export async function snapshot(store: ContextdStore): Promise<unknown> {
  const sessions: Record<string, unknown> = {};
  for (const id of await store.listSessionIds("", 1000)) {
    const entries = await store.readEntries(id, 0, 100_000);
    const revisions: Record<string, unknown> = {};
    for (const e of entries) {
      const r = await store.readEntryRevisions(id, e.id);
      if (r.length) revisions[e.id] = r;
    }
    sessions[id] = {
      record: await store.getSession(id),
      raw: await store.readRawSession(id),
      entries,
      rawEntries: (await store.readRawEntries(id, 0, 100_000)).map((r) => ({ ...r, payload: Buffer.from(r.payload).toString("base64") })),
      view: await store.readActiveView(id),
      totals: await store.readActiveTotals(id),
      revisions,
      keys: await store.readRawIdempotencyKeys(id, "", 1000),
      subagent: await store.readSubagentState(id),
    };
  }
  const raw = await store.readRawRegistry();
  return {
    counts: await store.countRows(),
    list: (await store.listSessions(1000)).sessions,
    sessions,
    registrations: await store.listRegistrations(),
    quarantines: await store.listQuarantines(),
    rawRegistry: {
      registrations: raw.registrations.map((r) => ({ ...r, info: Buffer.from(r.info).toString("base64") })),
      quarantines: raw.quarantines.map((q) => ({ ...q, payload: Buffer.from(q.payload).toString("base64") })),
    },
  };
}

/** StoreCopy: the raw rows contextctl migrate-store copies, and the one transaction it writes them in. */
export function describeStoreCopy(stores: Stores): void {
  describe("store copies", () => {
    it("copies a store into an empty one that then answers every read identically", async () => {
      const source = await stores.open();
      await fillStore(source);
      const target = await stores.openAt((await stores.otherPlace()).url);
      const seen: number[] = [];
      const copied = await copyStore(source, target, (p) => seen.push(p.entriesDone));
      expect(copied).toEqual(await source.countRows());
      expect(copied).toMatchObject({ sessions: 5, entryRevisions: 2, idempotencyKeys: 2, registrations: 2, quarantines: 1 });
      expect(seen.at(-1)).toBe(copied.entries);
      expect(await snapshot(target)).toEqual(await snapshot(source));

      // The copy is a working store: a repeated keyed request is replayed, appends continue the chain.
      const replay = await target.appendIdempotent("keyed", [msg("once", 2)], LABELS, { key: "k1", requestHash: "h1" });
      expect(replay).toEqual({ replayed: true, entryIds: [(await source.readEntries("keyed", 0, 1))[0].id], tokenCounts: [2] });
      const [next] = await target.appendMessages("chat", [msg("after the copy", 1)], LABELS);
      expect(next).toMatchObject({ seq: (await source.getSession("chat"))!.lastSeq + 1, parentId: (await source.getSession("chat"))!.latestCompactionId });
    });

    it("refuses a target that holds anything, and leaves it as it was", async () => {
      const source = await stores.open();
      await appendN(source, "s", 2);
      const target = await stores.openAt((await stores.otherPlace()).url);
      await target.saveQuarantine("x", quarantine());
      const err = await copyStore(source, target).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(FailedPreconditionError);
      expect((err as Error).message).toMatch(/is not empty \(1 quarantines\)/);
      expect(await target.countRows()).toMatchObject({ sessions: 0, quarantines: 1 });
    });

    it("writes nothing when the copy fails or is rolled back", async () => {
      const source = await stores.open();
      await appendN(source, "s", 1);
      const [entry] = await source.readRawEntries("s", 0, 1);
      const session = (await source.readRawSession("s"))!;
      const target = await stores.openAt((await stores.otherPlace()).url);

      const w1 = await target.beginRawWrite();
      await w1.writeSession(session);
      await w1.rollback();
      await w1.rollback(); // a no-op
      expect((await target.countRows()).sessions).toBe(0);

      const w2 = await target.beginRawWrite();
      await w2.writeSession(session);
      await w2.writeEntries("s", [entry]);
      await expect(w2.writeEntries("s", [entry])).rejects.toThrow(); // the same seq twice
      await expect(w2.commit()).rejects.toThrow(/already been committed or rolled back/);
      expect((await target.countRows()).entries).toBe(0);

      // After all that the target is still empty and copyable.
      await copyStore(source, target);
      expect(await snapshot(target)).toEqual(await snapshot(source));
    });
  });
}
