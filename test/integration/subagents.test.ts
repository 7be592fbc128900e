import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubagentContextMode, SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

describe("subagent sessions", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const parent = { sessionId: "parent" };

  beforeAll(async () => {
    contextd = await startContextd();
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
    await cx.appendMessages({ session: parent, messages: codingSession({ turns: 12, seed: 3 }).messages });
    await cx.compact({ session: parent, tokenBudget: 16_000, force: true });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("FORK seeds the child with the parent's active view", async () => {
    const spawn = await cx.prepareSubagentSpawn({ parent, child: { sessionId: "child-fork" }, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK });
    expect(spawn.rollbackHandle).not.toBe("");
    const parentView = await cx.assemble({ session: parent, tokenBudget: 100_000, autoCompact: false });
    const childView = await cx.assemble({ session: { sessionId: "child-fork" }, tokenBudget: 100_000, autoCompact: false });
    expect(childView.messages.map(messageText)).toEqual(parentView.messages.map(messageText));
    expect(childView.estimatedTokens).toBe(parentView.estimatedTokens);
    const info = (await cx.getSession({ session: { sessionId: "child-fork" } })).info!;
    expect(info.parentSessionId).toBe("parent");
  });

  it("ISOLATED starts empty, and rollback removes the child", async () => {
    const spawn = await cx.prepareSubagentSpawn({ parent, child: { sessionId: "child-iso" }, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED });
    const info = (await cx.getSession({ session: { sessionId: "child-iso" } })).info!;
    expect(info.entryCount).toBe(0);
    await cx.appendMessages({ session: { sessionId: "child-iso" }, messages: [user("sub task")] });
    expect((await cx.rollbackSubagentSpawn({ rollbackHandle: spawn.rollbackHandle })).rolledBack).toBe(true);
    const gone = (await cx.getSession({ session: { sessionId: "child-iso" } }).catch((e) => e)) as ServiceError;
    expect(gone.code).toBe(status.NOT_FOUND);
  });

  it("a child id that exists is refused, and ending a child with DELETED removes it", async () => {
    const dup = (await cx
      .prepareSubagentSpawn({ parent, child: { sessionId: "child-fork" }, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED })
      .catch((e) => e)) as ServiceError;
    expect(dup.code).toBe(status.ALREADY_EXISTS);
    await cx.endSubagent({ child: { sessionId: "child-fork" }, reason: SubagentEndReason.SUBAGENT_END_REASON_DELETED });
    const gone = (await cx.getSession({ session: { sessionId: "child-fork" } }).catch((e) => e)) as ServiceError;
    expect(gone.code).toBe(status.NOT_FOUND);
    expect((await cx.getSession({ session: parent })).info!.messageCount).toBeGreaterThan(0);
  });
});
