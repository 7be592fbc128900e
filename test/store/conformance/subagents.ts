import { describe, expect, it } from "vitest";

import { InvalidArgumentError, NotFoundError } from "../../../src/contract/errors.js";
import { SubagentEndReason } from "../../../src/contract/gen/contextd/v1/types.js";
import { LABELS, msg, type Stores } from "./harness.js";

const SWEPT = SubagentEndReason.SUBAGENT_END_REASON_SWEPT;
const COMPLETED = SubagentEndReason.SUBAGENT_END_REASON_COMPLETED;
const T0 = 1_800_000_000_000;

const child = (parent = "parent") => ({ ...LABELS, parentSessionId: parent });

/** Subagent TTLs: expiry set at creation, one end per child, the sweep's atomic claim. */
export function describeSubagents(stores: Stores): void {
  describe("subagent TTLs", () => {
    it("claims a child once its TTL has passed, exactly once, and keeps it (marked ended, SWEPT)", async () => {
      const store = await stores.open();
      await store.createSession("c1", child(), [{ kind: "message", message: msg("seed", 3).message, tokenCount: 3 }], { expiresAtMs: T0 + 1000 });
      await store.createSession("no-ttl", child(), []);
      expect(await store.readSubagentState("c1")).toEqual({ expiresAtMs: T0 + 1000, endedAtMs: 0, endReason: 0 });
      expect(await store.readSubagentState("no-ttl")).toEqual({ expiresAtMs: 0, endedAtMs: 0, endReason: 0 });
      expect(await store.readSubagentState("nobody")).toBeUndefined();

      expect(await store.claimExpiredSubagents(T0 + 999, 10)).toEqual([]);
      expect(await store.claimExpiredSubagents(T0 + 1000, 10)).toEqual([
        { sessionId: "c1", sessionKey: LABELS.sessionKey, agentId: LABELS.agentId, parentSessionId: "parent", expiresAtMs: T0 + 1000 },
      ]);
      expect(await store.claimExpiredSubagents(T0 + 99_999, 10)).toEqual([]);
      expect(await store.readSubagentState("c1")).toEqual({ expiresAtMs: T0 + 1000, endedAtMs: T0 + 1000, endReason: SWEPT });

      // Kept: readable and writable as before.
      expect((await store.getSession("c1"))?.messageCount).toBe(1);
      await store.appendMessages("c1", [msg("after the sweep", 2)], LABELS);
      expect((await store.readEntries("c1", 0, 10)).length).toBe(2);

      // An EndSubagent afterwards learns how it ended and records nothing.
      expect(await store.endSubagentSession("c1", COMPLETED, T0 + 5000)).toEqual({ ended: false, endedAtMs: T0 + 1000, reason: SWEPT });
      expect(await store.readSubagentState("c1")).toMatchObject({ endedAtMs: T0 + 1000, endReason: SWEPT });
    });

    it("ends a child once; an ended child is never claimed; a reopened one is again; a deleted one is gone", async () => {
      const store = await stores.open();
      for (const id of ["a", "b", "c"]) await store.createSession(id, child(), [], { expiresAtMs: T0 });
      expect(await store.endSubagentSession("a", COMPLETED, T0 - 5)).toEqual({ ended: true });
      expect(await store.endSubagentSession("a", SubagentEndReason.SUBAGENT_END_REASON_RELEASED, T0 - 4)).toEqual({
        ended: false,
        endedAtMs: T0 - 5,
        reason: COMPLETED,
      });
      await expect(store.endSubagentSession("nobody", COMPLETED, T0)).rejects.toThrow(NotFoundError);
      await expect(store.endSubagentSession("b", COMPLETED, 0)).rejects.toThrow(InvalidArgumentError);
      expect(await store.deleteSession("c")).toBe(true);
      expect((await store.claimExpiredSubagents(T0, 10)).map((c) => c.sessionId)).toEqual(["b"]);

      // reopen takes back only the end made at that time.
      expect(await store.reopenSubagentSession("a", T0 - 4)).toBe(false);
      expect(await store.reopenSubagentSession("a", T0 - 5)).toBe(true);
      expect(await store.readSubagentState("a")).toEqual({ expiresAtMs: T0, endedAtMs: 0, endReason: 0 });
      expect((await store.claimExpiredSubagents(T0 + 1, 10)).map((c) => c.sessionId)).toEqual(["a"]);
      expect(await store.reopenSubagentSession("nobody", T0)).toBe(false);
    });

    it("claims at most `limit`, earliest expiry first, and refuses bad arguments", async () => {
      const store = await stores.open();
      const expiries = [30, 10, 20, 10, 40];
      for (const [i, e] of expiries.entries()) await store.createSession(`k${i}`, child(), [], { expiresAtMs: T0 + e });
      await expect(store.createSession("bad", child(), [], { expiresAtMs: -1 })).rejects.toThrow(InvalidArgumentError);
      expect(await store.getSession("bad")).toBeUndefined();
      expect((await store.claimExpiredSubagents(T0 + 100, 2)).map((c) => c.sessionId)).toEqual(["k1", "k3"]);
      expect((await store.claimExpiredSubagents(T0 + 100, 2)).map((c) => c.sessionId)).toEqual(["k2", "k0"]);
      expect((await store.claimExpiredSubagents(T0 + 100, 2)).map((c) => c.sessionId)).toEqual(["k4"]);
      await expect(store.claimExpiredSubagents(T0, 0)).rejects.toThrow(InvalidArgumentError);
      await expect(store.claimExpiredSubagents(-1, 5)).rejects.toThrow(InvalidArgumentError);
    });

    it("several stores claiming at once (replicas) split the expired children: each is claimed by exactly one", async () => {
      const stores4 = await Promise.all([0, 1, 2, 3].map(() => stores.open()));
      const N = 60;
      for (let i = 0; i < N; i++) await stores4[i % 4].createSession(`r${String(i).padStart(2, "0")}`, child(), [], { expiresAtMs: T0 + (i % 7) });
      const claimed: string[][] = stores4.map(() => []);
      await Promise.all(
        stores4.map(async (s, i) => {
          for (;;) {
            const batch = await s.claimExpiredSubagents(T0 + 10, 3);
            if (batch.length === 0) return;
            claimed[i].push(...batch.map((c) => c.sessionId));
          }
        }),
      );
      const all = claimed.flat();
      expect(all.length).toBe(N);
      expect(new Set(all).size).toBe(N);
      // And concurrent EndSubagents against a claim: one end wins per child.
      await stores4[0].createSession("race", child(), [], { expiresAtMs: T0 });
      const [claim, ...ends] = await Promise.all([
        stores4[1].claimExpiredSubagents(T0, 10),
        ...stores4.map((s, i) => s.endSubagentSession("race", COMPLETED, T0 + 1 + i)),
      ]);
      const winners = (claim as unknown[]).length + ends.filter((e) => (e as { ended: boolean }).ended).length;
      expect(winners).toBe(1);
    });
  });
}
