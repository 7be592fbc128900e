import { describe, expect, it } from "vitest";

import { InvalidArgumentError } from "../../../src/contract/errors.js";
import { EngineInfo, TurnMaintenanceMode } from "../../../src/contract/gen/contextd/v1/engine.js";
import { QuarantineState } from "../../../src/contract/gen/contextd/v1/registry.js";
import type { StoredRegistration } from "../../../src/store/registry-store.js";
import type { Stores } from "./harness.js";

export function registration(engineId: string, owner: string, extra: Partial<StoredRegistration> = {}): StoredRegistration {
  return {
    engineId,
    instanceId: `dns:///${engineId}.local:50051`,
    locality: undefined,
    owner,
    endpoint: `dns:///${engineId}.local:50051`,
    info: EngineInfo.fromPartial({
      id: engineId,
      name: `Engine ${engineId}`,
      version: "1.2.3",
      ownsCompaction: true,
      turnMaintenanceMode: TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND,
      capabilities: { bootstrap: true, ingestBatch: false, afterTurn: true, maintain: false, subagents: true, dispose: false },
      hostRequirements: ["host-compaction", "transcript-rewrite"],
      protocolVersions: [1],
    }),
    protocolVersion: 1,
    registeredAtMs: 1_700_000_000_123,
    ...extra,
  };
}

export function quarantine(extra: Partial<QuarantineState> = {}): QuarantineState {
  return QuarantineState.fromPartial({
    operation: "compact",
    reason: "deadline exceeded after 180000 ms",
    failedAtMs: 1_700_000_000_000,
    releaseAtMs: 1_700_000_030_000,
    ejections: 1,
    manual: false,
    ...extra,
  });
}

/** The RegistryStore half: engine registrations and quarantine records. */
export function describeRegistry(stores: Stores): void {
  describe("registry records", () => {
    it("claims, refreshes, lists and deletes registrations, which survive a reopen", async () => {
      const store = await stores.open();
      expect(await store.listRegistrations()).toEqual([]);
      const b = registration("beta", "bob");
      const a = registration("alpha", "alice");
      expect(await store.claimRegistration(b, { refresh: false })).toEqual({ written: true });
      expect(await store.claimRegistration(a, { refresh: false })).toEqual({ written: true });
      expect(await store.listRegistrations()).toEqual([a, b]); // ordered by engine id, info round-trips

      // Refresh by the owner: same id, new endpoint/info/time.
      const a2 = registration("alpha", "alice", {
        endpoint: "unix:///run/alpha.sock",
        info: EngineInfo.fromPartial({ id: "alpha", name: "Alpha 2", protocolVersions: [1, 2] }),
        protocolVersion: 2,
        registeredAtMs: 1_700_000_999_000,
      });
      expect(await store.claimRegistration(a2, { refresh: false })).toEqual({ written: false, holder: a });
      expect(await store.claimRegistration(a2, { refresh: true })).toEqual({ written: true });
      // Another owner never takes a held id, refresh or not; the holder is answered.
      const stolen = registration("alpha", "carol");
      expect(await store.claimRegistration(stolen, { refresh: true })).toEqual({ written: false, holder: a2 });
      expect(await store.claimRegistration(stolen, { refresh: false })).toEqual({ written: false, holder: a2 });
      expect(await store.listRegistrations()).toEqual([a2, b]);

      await store.close();
      const again = await stores.open();
      expect(await again.listRegistrations()).toEqual([a2, b]);
      expect(await again.deleteRegistration("alpha")).toBe(true);
      expect(await again.deleteRegistration("alpha")).toBe(false);
      expect(await again.deleteRegistration("never")).toBe(false);
      expect(await again.listRegistrations()).toEqual([b]);

      await again.close();
      expect(await (await stores.open()).listRegistrations()).toEqual([b]);
    });

    it("holds many instances per engine id for its owner only; each is refreshed and removed alone, the engine with its last", async () => {
      const store = await stores.open();
      const i1 = registration("alpha", "alice", { instanceId: "pod-1", endpoint: "10.0.0.1:7000", registeredAtMs: 1 });
      const i2 = registration("alpha", "alice", {
        instanceId: "pod-2",
        endpoint: "10.0.0.2:7000",
        locality: { node: "n2", zone: "z", replica: "" },
        registeredAtMs: 2,
      });
      expect(await store.claimRegistration(i1, { refresh: false })).toEqual({ written: true });
      // Another instance of an id its owner holds is added, no refresh needed.
      expect(await store.claimRegistration(i2, { refresh: false })).toEqual({ written: true });
      expect(await store.listRegistrations()).toEqual([i1, i2]);
      // The same instance again needs a refresh; another owner gets no instance at all.
      const i1b = { ...i1, endpoint: "10.0.0.9:7000", registeredAtMs: 3 };
      expect(await store.claimRegistration(i1b, { refresh: false })).toEqual({ written: false, holder: i1 });
      expect(await store.claimRegistration(i1b, { refresh: true })).toEqual({ written: true });
      const carol = registration("alpha", "carol", { instanceId: "pod-3" });
      expect(await store.claimRegistration(carol, { refresh: true })).toEqual({ written: false, holder: i1b });
      expect(await store.listRegistrations()).toEqual([i1b, i2]);

      // Quarantine records per instance, beside the engine-wide one.
      await store.saveQuarantine("alpha", quarantine(), "pod-1");
      await store.saveQuarantine("alpha", quarantine({ manual: true, operation: "manual" }));
      expect([...((await store.listInstanceQuarantines()).get("alpha")?.keys() ?? [])]).toEqual(["pod-1"]);
      expect(await store.clearQuarantine("alpha", "pod-1")).toBe(true);
      expect((await store.listInstanceQuarantines()).size).toBe(0);
      expect((await store.listQuarantines()).has("alpha")).toBe(true);

      // Removing a dead instance's registration spares one refreshed since.
      expect(await store.deleteRegistration("alpha", "pod-1", { registeredAtMs: i1.registeredAtMs })).toBe(false);
      expect(await store.listRegistrations()).toEqual([i1b, i2]);
      expect(await store.deleteRegistration("alpha", "pod-1", { registeredAtMs: i1b.registeredAtMs })).toBe(true);
      expect(await store.deleteRegistration("alpha", "pod-1")).toBe(false);
      expect(await store.listRegistrations()).toEqual([i2]);
      expect(await store.deleteRegistration("alpha", "pod-2")).toBe(true);
      expect(await store.listRegistrations()).toEqual([]);
      // The id is free again once its last instance is gone.
      expect(await store.claimRegistration(carol, { refresh: false })).toEqual({ written: true });
      expect(await store.listRegistrations()).toEqual([carol]);
    });

    it("refuses a registration without engine id or owner", async () => {
      const store = await stores.open();
      await expect(store.claimRegistration(registration("", "alice"), { refresh: true })).rejects.toThrow(InvalidArgumentError);
      await expect(store.claimRegistration(registration("x", "  "), { refresh: true })).rejects.toThrow(/owner/);
      await expect(store.claimRegistration(registration("x", "alice", { protocolVersion: -1 }), { refresh: true })).rejects.toThrow(InvalidArgumentError);
      expect(await store.listRegistrations()).toEqual([]);
    });

    it("saves, replaces, clears and lists quarantines, which survive a reopen", async () => {
      const store = await stores.open();
      expect((await store.listQuarantines()).size).toBe(0);
      const q1 = quarantine();
      const manual = quarantine({ operation: "manual", reason: "operator isolate", releaseAtMs: 0, manual: true });
      await store.saveQuarantine("zeta", q1);
      await store.saveQuarantine("eta", manual);
      let all = await store.listQuarantines();
      expect([...all.keys()]).toEqual(["eta", "zeta"]);
      expect(all.get("zeta")).toEqual(q1);
      expect(all.get("eta")).toEqual(manual);

      const q2 = quarantine({ operation: "health", reason: "2 failed health checks", ejections: 2, releaseAtMs: 1_700_000_060_000 });
      await store.saveQuarantine("zeta", q2);
      all = await store.listQuarantines();
      expect(all.size).toBe(2);
      expect(all.get("zeta")).toEqual(q2);

      await store.close();
      const again = await stores.open();
      all = await again.listQuarantines();
      expect(all).toEqual(
        new Map([
          ["eta", manual],
          ["zeta", q2],
        ]),
      );

      expect(await again.clearQuarantine("eta")).toBe(true);
      expect(await again.clearQuarantine("eta")).toBe(false);
      expect(await again.clearQuarantine("never")).toBe(false);
      expect(await again.listQuarantines()).toEqual(new Map([["zeta", q2]]));
      await again.close();
      expect(await (await stores.open()).listQuarantines()).toEqual(new Map([["zeta", q2]]));
      await expect((await stores.open()).saveQuarantine("", q1)).rejects.toThrow(InvalidArgumentError);
    });

    it("keeps registrations and quarantines independent of each other and of transcripts", async () => {
      const store = await stores.open();
      await store.claimRegistration(registration("alpha", "alice"), { refresh: false });
      await store.saveQuarantine("alpha", quarantine());
      await store.appendMessages("s1", [], { sessionKey: "k", agentId: "a" });
      expect(await store.deleteRegistration("alpha")).toBe(true);
      expect((await store.listQuarantines()).has("alpha")).toBe(true);
      expect(await store.deleteSession("s1")).toBe(true);
      expect((await store.listQuarantines()).size).toBe(1);
    });

    it("shares state between two connections to the same store", async () => {
      const a = await stores.open();
      const b = await stores.open();
      await a.claimRegistration(registration("alpha", "alice"), { refresh: false });
      await a.saveQuarantine("alpha", quarantine());
      expect((await b.listRegistrations()).map((r) => r.owner)).toEqual(["alice"]);
      expect(await b.clearQuarantine("alpha")).toBe(true);
      expect((await a.listQuarantines()).size).toBe(0);
    });

    it("of two connections claiming one new id at once for different owners, exactly one wins", async () => {
      const a = await stores.open();
      const b = await stores.open();
      for (let i = 0; i < 20; i++) {
        const id = `race-${i}`;
        const claims = await Promise.all([
          a.claimRegistration(registration(id, "alice"), { refresh: true }),
          b.claimRegistration(registration(id, "bob"), { refresh: true }),
        ]);
        expect(
          claims.filter((c) => c.written),
          id,
        ).toHaveLength(1);
        const winner = (await a.listRegistrations()).find((r) => r.engineId === id)!.owner;
        const loser = claims.find((c) => !c.written) as { written: false; holder: { owner: string } };
        expect(loser.holder.owner, id).toBe(winner);
      }
    });
  });
}
