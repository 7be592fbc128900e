import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Role } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { SqliteStore } from "../../../../src/store/sqlite/sqlite-store.js";

const msg = (text: string) => ({ message: textMessage(Role.ROLE_USER, text), tokenCount: 3 });
const T = 1_700_000_000_000;

describe("SqliteStore: deletion that reaches engines, and retention queries", () => {
  let dir: string;
  let store: SqliteStore;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "deletions-"));
    store = SqliteStore.open(path.join(dir, "contextd.db"));
    await store.appendMessages("root", [msg("parent")], { sessionKey: "k", agentId: "a" });
    await store.createSession(
      "child",
      { sessionKey: "", agentId: "a", parentSessionId: "root" },
      [msg("child")].map((m) => ({ kind: "message" as const, ...m })),
    );
    await store.createSession("grandchild", { sessionKey: "", agentId: "a", parentSessionId: "child" }, []);
    await store.appendMessages("other", [msg("other")], { sessionKey: "", agentId: "b" });
    for (const [s, e] of [
      ["root", "e1"],
      ["root", "e2"],
      ["child", "e1"],
      ["other", "e1"],
    ])
      await store.recordSessionEngine(s!, e!, T);
    await store.recordSessionEngine("root", "e1", T + 1); // idempotent
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a deletion takes the subagent tree and records one delivery per deleted session and engine that served it, in one transaction", async () => {
    expect(await store.readSessionEngines("root")).toEqual(["e1", "e2"]);
    const deleted = await store.deleteSessionTree("root", { reason: 1, atMs: T });
    expect(deleted?.sessions.map((s) => s.sessionId).sort()).toEqual(["child", "grandchild", "root"]);
    expect(deleted?.deliveries).toBe(3);
    for (const id of ["root", "child", "grandchild"]) expect(await store.getSession(id)).toBeUndefined();
    expect(await store.getSession("other")).toBeDefined();
    expect(await store.readSessionEngines("root")).toEqual([]);
    expect(await store.countForgetDeliveries()).toBe(3);
    const claimed = await store.claimForgetDeliveries("r1", T, 1_000, 10);
    expect(claimed.map((d) => [d.sessionId, d.engineId, d.reason, d.attempts]).sort()).toEqual([
      ["child", "e1", 2, 1],
      ["root", "e1", 1, 1],
      ["root", "e2", 1, 1],
    ]);
    expect(await store.deleteSessionTree("root", { reason: 1, atMs: T })).toBeUndefined();
  });

  it("keep_subagents keeps the children; a changed session is not deleted by a conditional delete", async () => {
    const before = (await store.getSession("root"))!.updatedAtMs;
    expect(await store.deleteSessionTree("root", { reason: 3, atMs: T, expectUpdatedAtMs: before - 1 })).toBeUndefined();
    expect(await store.countForgetDeliveries()).toBe(0);
    const kept = await store.deleteSessionTree("root", { reason: 1, atMs: T, keepSubagents: true, expectUpdatedAtMs: before });
    expect(kept?.sessions.map((s) => s.sessionId)).toEqual(["root"]);
    expect(await store.getSession("child")).toBeDefined();
  });

  it("a leased delivery goes to one owner until its lease ends; only the holder settles it; a failure is due again at its retry time", async () => {
    await store.deleteSessionTree("other", { reason: 1, atMs: T });
    const [d] = await store.claimForgetDeliveries("r1", T, 1_000, 10);
    expect(d).toBeDefined();
    expect(await store.claimForgetDeliveries("r2", T + 999, 1_000, 10)).toEqual([]);
    const [taken] = await store.claimForgetDeliveries("r2", T + 1_000, 1_000, 10);
    expect(taken?.attempts).toBe(2);
    expect(await store.settleForgetDelivery(d!, "r1", { done: true })).toBe(false);
    expect(await store.settleForgetDelivery(taken!, "r2", { done: false, retryAtMs: T + 5_000, error: "engine down" })).toBe(true);
    expect(await store.claimForgetDeliveries("r1", T + 4_999, 1_000, 10)).toEqual([]);
    expect(await store.wakeForgetDeliveries("e1", T + 2_000)).toBe(1);
    const [again] = await store.claimForgetDeliveries("r1", T + 2_000, 1_000, 10);
    expect(await store.settleForgetDelivery(again!, "r1", { done: true })).toBe(true);
    expect(await store.countForgetDeliveries()).toBe(0);
  });

  it("a named lease is one owner's until it expires; its owner renews it", async () => {
    expect(await store.tryLease("sweep", "r1", T, 1_000)).toBe(true);
    expect(await store.tryLease("sweep", "r2", T + 500, 1_000)).toBe(false);
    expect(await store.tryLease("sweep", "r1", T + 900, 1_000)).toBe(true);
    expect(await store.tryLease("sweep", "r2", T + 1_899, 1_000)).toBe(false);
    expect(await store.tryLease("sweep", "r2", T + 1_900, 1_000)).toBe(true);
  });

  it("retention rules select by agent, idle time and age, soonest first", async () => {
    const now = Date.now();
    const idle = await store.listExpiringSessions({ excludeAgents: [], maxIdleMs: 60_000 }, now + 60_000, 10);
    expect(idle.map((s) => s.sessionId).sort()).toEqual(["child", "grandchild", "other", "root"]);
    expect(idle.every((s) => s.cause === "idle" && s.expiresAtMs === s.updatedAtMs + 60_000)).toBe(true);
    expect(await store.listExpiringSessions({ excludeAgents: [], maxIdleMs: 60_000 }, now - 1, 10)).toEqual([]);
    const forB = await store.listExpiringSessions({ agentId: "b", excludeAgents: [], maxAgeMs: 1 }, now + 10, 10);
    expect(forB.map((s) => [s.sessionId, s.cause])).toEqual([["other", "age"]]);
    const notB = await store.listExpiringSessions({ excludeAgents: ["b"], maxAgeMs: 1 }, now + 10, 2);
    expect(notB).toHaveLength(2);
    expect(notB.every((s) => s.agentId === "a")).toBe(true);
    expect(await store.listExpiringSessions({ excludeAgents: [] }, now + 10, 10)).toEqual([]);
  });
});
