import { NO_ROWS } from "../../../src/store/store-copy.js";
import { describe, expect, it } from "vitest";

import { copyStore } from "../../../src/cli/commands/migrate-store.js";
import { FailedPreconditionError } from "../../../src/contract/errors.js";
import { EngineInfo } from "../../../src/contract/gen/contextd/v1/engine.js";
import { QuarantineState } from "../../../src/contract/gen/contextd/v1/registry.js";
import { Role, SubagentEndReason } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import { appendN, compaction, LABELS, msg, type Stores } from "./harness.js";
import { importSample, SAMPLES } from "./keys-and-imports.js";
import { quarantine, registration } from "./registry.js";

/** A store with something of every kind: imports, compactions, rewrites, keys, registry records (fillRegistry). */
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
  await fillRegistry(store);
}

/** The instances of MULTI, one per zone, each on its own node beside its own contextd replica. */
export const MULTI = "gamma";
export const MULTI_INSTANCES = ["gamma-a", "gamma-b", "gamma-c"];

/**
 * Registry records of every kind: two single-instance engines (one isolated by an operator as a
 * whole), and MULTI with three instances at distinct localities, of which gamma-b is quarantined
 * automatically (a failed health check), gamma-c isolated by an operator, and the engine as a whole
 * isolated by an operator too: 3 engine rows, 5 instance rows, 2 engine-wide and 2 instance records.
 */
export async function fillRegistry(store: ContextdStore): Promise<void> {
  await store.claimRegistration(registration("alpha", "alice"), { refresh: true });
  await store.claimRegistration(registration("beta", "bob"), { refresh: true });
  await store.saveQuarantine("beta", quarantine({ manual: true, operation: "manual", reason: "isolated" }));
  for (const [i, instanceId] of MULTI_INSTANCES.entries()) {
    const locality = { node: `node-${i + 1}`, zone: `zone-${"abc"[i]}`, replica: `contextd-${i}` };
    const reg = registration(MULTI, "carol", { instanceId, endpoint: `10.0.${i}.7:7000`, locality, registeredAtMs: 1_700_000_100_000 + i });
    expect(await store.claimRegistration(reg, { refresh: false })).toEqual({ written: true });
  }
  await store.saveQuarantine(
    MULTI,
    quarantine({ operation: "health", reason: "health check: NOT_SERVING", failedAtMs: 1_700_000_200_000, releaseAtMs: 1_700_000_230_000, ejections: 2 }),
    "gamma-b",
  );
  await store.saveQuarantine(MULTI, quarantine({ manual: true, operation: "manual", reason: "isolated gamma-c", releaseAtMs: 0 }), "gamma-c");
  await store.saveQuarantine(MULTI, quarantine({ manual: true, operation: "manual", reason: "isolated the whole engine", releaseAtMs: 0 }));
}

/** What a store's registry answers through its own reads (what contextd's registry loads). */
export async function registryReads(store: ContextdStore): Promise<unknown> {
  return {
    registrations: await store.listRegistrations(),
    quarantines: await store.listQuarantines(),
    instanceQuarantines: await store.listInstanceQuarantines(),
  };
}

/** The registry's raw rows, bytes as base64 (comparable across drivers: Buffer and Uint8Array alike). */
export async function rawRegistry(store: ContextdStore): Promise<unknown> {
  const raw = await store.readRawRegistry();
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
  return {
    registrations: raw.registrations.map((r) => ({ ...r, info: b64(r.info) })),
    instances: raw.instances.map((i) => ({ ...i, locality: b64(i.locality), info: b64(i.info) })),
    quarantines: raw.quarantines.map((q) => ({ ...q, payload: b64(q.payload) })),
    instanceQuarantines: raw.instanceQuarantines.map((q) => ({ ...q, payload: b64(q.payload) })),
  };
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
  return {
    counts: await store.countRows(),
    list: (await store.listSessions(1000)).sessions,
    sessions,
    registry: await registryReads(store),
    rawRegistry: await rawRegistry(store),
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
      expect(copied).toMatchObject({
        sessions: 5,
        entryRevisions: 2,
        idempotencyKeys: 2,
        registrations: 3,
        instances: 5,
        quarantines: 2,
        instanceQuarantines: 2,
      });
      expect(seen.at(-1)).toBe(copied.entries);
      expect(await snapshot(target)).toEqual(await snapshot(source));

      // The copy is a working store: a repeated keyed request is replayed, appends continue the chain.
      const replay = await target.appendIdempotent("keyed", [msg("once", 2)], LABELS, { key: "k1", requestHash: "h1" });
      expect(replay).toEqual({ replayed: true, entryIds: [(await source.readEntries("keyed", 0, 1))[0].id], tokenCounts: [2] });
      const [next] = await target.appendMessages("chat", [msg("after the copy", 1)], LABELS);
      expect(next).toMatchObject({ seq: (await source.getSession("chat"))!.lastSeq + 1, parentId: (await source.getSession("chat"))!.latestCompactionId });
    });

    it("keeps every instance of an engine (id, endpoint, locality) and every quarantine record: an instance's automatic one, an operator's isolation of one instance and of the whole engine", async () => {
      const source = await stores.open();
      await fillRegistry(source);
      const target = await stores.openAt((await stores.otherPlace()).url);
      expect(await copyStore(source, target)).toMatchObject({ registrations: 3, instances: 5, quarantines: 2, instanceQuarantines: 2 });

      const multi = (await target.listRegistrations()).filter((r) => r.engineId === MULTI);
      expect(multi.map((r) => [r.instanceId, r.endpoint, r.locality])).toEqual([
        ["gamma-a", "10.0.0.7:7000", { node: "node-1", zone: "zone-a", replica: "contextd-0" }],
        ["gamma-b", "10.0.1.7:7000", { node: "node-2", zone: "zone-b", replica: "contextd-1" }],
        ["gamma-c", "10.0.2.7:7000", { node: "node-3", zone: "zone-c", replica: "contextd-2" }],
      ]);
      const perInstance = (await target.listInstanceQuarantines()).get(MULTI);
      expect([...(perInstance?.keys() ?? [])]).toEqual(["gamma-b", "gamma-c"]);
      expect(perInstance?.get("gamma-b")).toMatchObject({ operation: "health", manual: false, ejections: 2 });
      expect(perInstance?.get("gamma-c")).toMatchObject({ operation: "manual", manual: true, reason: "isolated gamma-c" });
      expect((await target.listQuarantines()).get(MULTI)).toMatchObject({ manual: true, reason: "isolated the whole engine" });
      expect(await registryReads(target)).toEqual(await registryReads(source));
      expect(await rawRegistry(target)).toEqual(await rawRegistry(source));

      // The copy is a working registry: one instance goes, the others and their records stay.
      expect(await target.deleteRegistration(MULTI, "gamma-a")).toBe(true);
      expect((await target.listRegistrations()).filter((r) => r.engineId === MULTI).map((r) => r.instanceId)).toEqual(["gamma-b", "gamma-c"]);
      expect(await target.clearQuarantine(MULTI, "gamma-b")).toBe(true);
      expect([...((await target.listInstanceQuarantines()).get(MULTI)?.keys() ?? [])]).toEqual(["gamma-c"]);
    });

    it("copies the registry's rows verbatim, an engine row without instance rows and instance rows without an engine row included", async () => {
      // What an older replica leaves: engine rows it wrote alone, instance rows of an id it deregistered.
      const source = await stores.open();
      const info = (id: string) => EngineInfo.encode(EngineInfo.fromPartial({ id, name: id, protocolVersions: [1] })).finish();
      const w = await source.beginRawWrite();
      await w.writeRegistry({
        registrations: [{ engineId: "legacy", owner: "dave", endpoint: "10.1.0.1:7000", info: info("legacy"), protocolVersion: 1, registeredAtMs: 5 }],
        instances: [
          {
            engineId: "gone",
            instanceId: "pod-9",
            endpoint: "10.1.0.9:7000",
            locality: new Uint8Array(),
            info: info("gone"),
            protocolVersion: 1,
            registeredAtMs: 6,
          },
        ],
        quarantines: [],
        instanceQuarantines: [{ engineId: "legacy", instanceId: "10.1.0.1:7000", payload: QuarantineState.encode(quarantine()).finish(), updatedAtMs: 7 }],
      });
      await w.commit();
      const target = await stores.openAt((await stores.otherPlace()).url);
      expect(await copyStore(source, target)).toMatchObject({ registrations: 1, instances: 1, quarantines: 0, instanceQuarantines: 1 });
      expect(await rawRegistry(target)).toEqual(await rawRegistry(source));
      expect(await registryReads(target)).toEqual(await registryReads(source));
      expect((await target.listRegistrations()).map((r) => [r.engineId, r.instanceId])).toEqual([["legacy", "10.1.0.1:7000"]]);
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

      // Rows of the instance tables alone are something too.
      const other = await stores.openAt((await stores.otherPlace()).url);
      await other.saveQuarantine("x", quarantine(), "pod-1");
      await expect(copyStore(source, other)).rejects.toThrow(/is not empty \(1 instanceQuarantines\)/);
      expect(await other.countRows()).toMatchObject({ sessions: 0, instanceQuarantines: 1 });
    });

    it("writes nothing when the copy fails or is rolled back", async () => {
      const source = await stores.open();
      await appendN(source, "s", 1);
      await fillRegistry(source);
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

      // A failure in the registry, the last part of a copy, discards the sessions written before it.
      const w3 = await target.beginRawWrite();
      await w3.writeSession(session);
      await w3.writeEntries("s", [entry]);
      const raw = await source.readRawRegistry();
      await expect(w3.writeRegistry({ ...raw, instances: [...raw.instances, raw.instances[0]] })).rejects.toThrow(); // one instance twice
      expect(await target.countRows()).toEqual(NO_ROWS);

      // After all that the target is still empty and copyable.
      await copyStore(source, target);
      expect(await snapshot(target)).toEqual(await snapshot(source));
    });
  });
}
