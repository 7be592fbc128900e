/**
 * Resolving the session a request names (src/host/session-visibility.ts) on a real SQLite store:
 * the answer is a new ref with the stored agent and key, the request's own ref is never written,
 * and another agent's session reads as missing (or, for a create, as taken).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import { pageKey } from "../../../src/host/page-token.js";
import { agentScope, type RuntimeAccess } from "../../../src/host/runtime-access.js";
import { admitExisting, resolveSession } from "../../../src/host/session-visibility.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";

/** A token that may act for the agents `patterns` name. */
function access(patterns: string[]): RuntimeAccess {
  const scope = agentScope(patterns);
  const may = (agentId: string) => scope.exact.includes(agentId) || scope.prefixes.some((p) => agentId.startsWith(p));
  return {
    checkAgent: (agentId) => {
      if (!may(agentId)) throw new Error(`not for ${agentId}`);
    },
    mayActFor: may,
    agents: scope,
    pageKey: pageKey(undefined),
  };
}

let dir: string;
let store: SqliteStore;
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-visibility-"));
  store = SqliteStore.open(path.join(dir, "v.db"));
  await store.appendMessages("s1", [{ message: textMessage(Role.ROLE_USER, "hi"), tokenCount: 1 }], { agentId: "team-a", sessionKey: "key-1" });
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("resolving a request's session", () => {
  it("answers a new ref with the stored agent and key, and leaves the request's ref as it came", async () => {
    const ref = Object.freeze({ sessionId: "s1", agentId: "", sessionKey: "" });
    for (const use of ["existing", "create"] as const) {
      const resolved = await resolveSession(store, access(["*"]), ref, "session", use);
      expect(resolved).toEqual({ sessionId: "s1", agentId: "team-a", sessionKey: "key-1" });
      expect(resolved).not.toBe(ref);
    }
    expect(ref).toEqual({ sessionId: "s1", agentId: "", sessionKey: "" });
  });

  it("a view RPC's claim is checked now and completed on the row its first read holds", async () => {
    const ref = Object.freeze({ sessionId: "s1", agentId: "", sessionKey: "" });
    const viewed = await resolveSession(store, access(["team-*"]), ref, "session", "view");
    expect(viewed.claimed).toEqual(ref);
    const view = await store.readActiveView("s1");
    expect(admitExisting(access(["team-*"]), viewed.claimed, view!.session)).toEqual({ sessionId: "s1", agentId: "team-a", sessionKey: "key-1" });
    const read = await viewed.read();
    expect(read.session).toEqual({ sessionId: "s1", agentId: "team-a", sessionKey: "key-1" });
    expect(read.view.session.sessionId).toBe("s1");
    // Another agent's: the claim passes (it names no agent), the read refuses it as missing.
    await expect((await resolveSession(store, access(["team-b"]), ref, "session", "view")).read()).rejects.toThrow(/session "s1" not found/);
  });

  it("another agent's session is missing to a token that does not cover it, and taken to a create", async () => {
    const ref = { sessionId: "s1", agentId: "", sessionKey: "" };
    await expect(resolveSession(store, access(["team-b"]), ref, "session", "existing")).rejects.toThrow(/session "s1" not found/);
    await expect(resolveSession(store, access(["team-b"]), { ...ref, agentId: "team-b" }, "session", "create")).rejects.toThrow(/session "s1" already exists/);
  });
});
