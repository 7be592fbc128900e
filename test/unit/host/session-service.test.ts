/**
 * SessionService's session step (src/host/session-service.ts) on a real SQLite store: it resolves
 * each session a row declares, once, for the handler — never writing the request — and admits the
 * call against its agents until the handler settles. (That every RPC has a row, and each row
 * declares exactly the sessions its request names: test/unit/server/served-services.test.ts.)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { RequestContext } from "../../../src/contract/request-context.js";
import { DEFAULT_TENANT_LIMITS, TenantLimits } from "../../../src/contract/tenant-limits.js";
import { pageKey } from "../../../src/host/page-token.js";
import { agentScope, type RuntimeAccess } from "../../../src/host/runtime-access.js";
import { sessionStep } from "../../../src/host/session-service.js";
import type { AdmittedSession, SessionView } from "../../../src/host/session-visibility.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";

const everyAgent: RuntimeAccess = { checkAgent: () => undefined, mayActFor: () => true, agents: agentScope(["*"]), pageKey: pageKey(undefined) };
const ctx = { principal: everyAgent } as RequestContext<RuntimeAccess>;

let dir: string;
let store: SqliteStore;
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-session-step-"));
  store = SqliteStore.open(path.join(dir, "s.db"));
  await store.appendMessages("parent", [{ message: textMessage(Role.ROLE_USER, "hi"), tokenCount: 1 }], { agentId: "team-a", sessionKey: "k" });
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("SessionService's session step", () => {
  it("resolves each declared session for its use, leaves the request as it came, and holds the agents' admission until released", async () => {
    const limits = new TenantLimits({ ...DEFAULT_TENANT_LIMITS, maxCallsInFlightPerAgent: 1 });
    const step = sessionStep(store, limits);
    const request = Object.freeze({
      parent: Object.freeze({ sessionId: "parent", agentId: "", sessionKey: "" }),
      child: Object.freeze({ sessionId: "child", agentId: "team-a", sessionKey: "" }),
    });
    const { sessions, release } = await step({ session: { parent: "existing", child: "create" } }, request, ctx);
    const { parent, child } = sessions as { parent: AdmittedSession; child: AdmittedSession };
    expect(parent).toEqual({ sessionId: "parent", agentId: "team-a", sessionKey: "k" });
    expect(child).toEqual({ sessionId: "child", agentId: "team-a", sessionKey: "" });
    expect(request.parent.agentId).toBe("");
    // team-a has its one call in flight until the handler settles.
    await expect(step({ session: { session: "existing" } }, { session: request.parent }, ctx)).rejects.toThrow(/team-a/);
    release!();
    (await step({ session: { session: "existing" } }, { session: request.parent }, ctx)).release!();
  });

  it("hands a view session as its one read, which admits it on the row the view holds", async () => {
    const step = sessionStep(store, new TenantLimits(DEFAULT_TENANT_LIMITS));
    const { sessions, release } = await step({ session: { session: "view" } }, { session: { sessionId: "parent", agentId: "", sessionKey: "" } }, ctx);
    const viewed = await (sessions as { session: SessionView }).session.read();
    expect(viewed.session.agentId).toBe("team-a");
    expect(viewed.view.messages).toHaveLength(1);
    release!();
  });
});
