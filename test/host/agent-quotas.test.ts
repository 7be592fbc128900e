import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorReason } from "../../src/contract/gen/contextd/v1/errors.js";
import { ContextdClient, errorDetails, errorReason } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { refusal } from "../helpers/registry-client.js";
import { contextctl, tables } from "../cli/run-contextctl.js";

/** A number as contextctl's tables print it. */
const n = (x: number) => x.toLocaleString("en-US");

/**
 * Per-agent quotas (`quotas`), against a real contextd on a SQLite file: a call that would take an
 * agent past its sessions or its stored bytes is RESOURCE_EXHAUSTED QUOTA_EXCEEDED naming the
 * quota, and writes nothing; usage is in GetSession and `contextctl session` / `sessions`.
 */
describe("per-agent quotas", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    cd = await startContextd({
      config: {
        quotas: {
          max_sessions: 2,
          agents: { roomy: { max_sessions: 0 }, tight: { max_stored_bytes: 6000 } },
        },
      },
    });
    cx = new ContextdClient({ address: cd.address });
  });

  afterAll(async () => {
    cx?.close();
    await cd?.stop();
    await cd?.cleanup();
  });

  it("a third session of an agent with quotas.max_sessions 2 is refused QUOTA_EXCEEDED naming the quota, and is not created", async () => {
    await cx.appendMessages({ session: { sessionId: "a-1", agentId: "alpha" }, messages: [user("one")] });
    await cx.appendMessages({ session: { sessionId: "a-2", agentId: "alpha" }, messages: [user("two")] });
    const err = await refusal(cx.appendMessages({ session: { sessionId: "a-3", agentId: "alpha" }, messages: [user("three")] }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("quotas.max_sessions");
    expect(errorReason(err)).toBe(ErrorReason.QUOTA_EXCEEDED);
    expect(errorDetails(err)?.metadata).toEqual({ quota: "quotas.max_sessions", limit_value: "2", used: "2", agent_id: "alpha" });
    expect((await refusal(cx.getSession({ session: { sessionId: "a-3" } }))).code).toBe(status.NOT_FOUND);
    // An import and a subagent child are sessions too.
    const imported = await refusal(
      cx.importTranscript({ session: { sessionId: "a-4", agentId: "alpha" }, jsonl: Buffer.from(`${JSON.stringify({ role: "user", content: "hi" })}\n`) }),
    );
    expect(errorReason(imported)).toBe(ErrorReason.QUOTA_EXCEEDED);
    const child = await refusal(
      cx.prepareSubagentSpawn({ parent: { sessionId: "a-1", agentId: "alpha" }, child: { sessionId: "a-1-child", agentId: "alpha" } }),
    );
    expect(errorReason(child)).toBe(ErrorReason.QUOTA_EXCEEDED);
    // The sessions it holds still take appends.
    await cx.appendMessages({ session: { sessionId: "a-1", agentId: "alpha" }, messages: [user("more")] });
  });

  it("deleting a session makes room under quotas.max_sessions", async () => {
    await cx.appendMessages({ session: { sessionId: "d-1", agentId: "delta" }, messages: [user("one")] });
    await cx.appendMessages({ session: { sessionId: "d-2", agentId: "delta" }, messages: [user("two")] });
    await refusal(cx.appendMessages({ session: { sessionId: "d-3", agentId: "delta" }, messages: [user("three")] }));
    await cx.deleteSession({ session: { sessionId: "d-1", agentId: "delta" } });
    await cx.appendMessages({ session: { sessionId: "d-3", agentId: "delta" }, messages: [user("three")] });
  });

  it("an agent's own max_sessions 0 lifts the default quota for it", async () => {
    for (let i = 0; i < 4; i++) await cx.appendMessages({ session: { sessionId: `r-${i}`, agentId: "roomy" }, messages: [user(`m${i}`)] });
    const usage = (await cx.getSession({ session: { sessionId: "r-0" } })).agentUsage;
    expect(usage).toMatchObject({ agentId: "roomy", sessions: 4, maxSessions: 0, maxStoredBytes: 0 });
  });

  it("an append past quotas.max_stored_bytes is refused QUOTA_EXCEEDED and writes none of its messages", async () => {
    const session = { sessionId: "t-1", agentId: "tight" };
    await cx.appendMessages({ session, messages: [user("x".repeat(2000)), user("y".repeat(2000))] });
    const before = (await cx.getSession({ session })).info!;
    expect(before.storedBytes).toBeGreaterThan(4000);
    expect(before.storedBytes).toBeLessThan(6000);
    const err = await refusal(cx.appendMessages({ session, messages: [user("z".repeat(1000)), user("w".repeat(1000))] }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(errorReason(err)).toBe(ErrorReason.QUOTA_EXCEEDED);
    expect(errorDetails(err)?.metadata).toMatchObject({
      quota: "quotas.max_stored_bytes",
      limit_value: "6000",
      agent_id: "tight",
      used: String(before.storedBytes),
    });
    const after = await cx.getSession({ session });
    expect(after.info!.entryCount).toBe(before.entryCount);
    expect(after.info!.storedBytes).toBe(before.storedBytes);
    expect(after.agentUsage).toEqual({ agentId: "tight", sessions: 1, storedBytes: before.storedBytes, maxSessions: 2, maxStoredBytes: 6000 });
    // What fits still goes in.
    await cx.appendMessages({ session, messages: [user("small")] });
  });

  it("contextctl session shows the agent's usage against its quotas, and sessions the bytes per session and per agent", async () => {
    const one = await contextctl(cd.address, "session", "t-1");
    expect(one.code).toBe(0);
    expect(one.stdout).toContain("agent tight usage");
    const usage = tables(one.stdout).at(-1)!;
    const stored = (await cx.getSession({ session: { sessionId: "t-1" } })).info!.storedBytes;
    expect(usage).toEqual([
      ["sessions", "1", "2", "50.0%"],
      ["stored bytes", n(stored), "6,000", `${((stored / 6000) * 100).toFixed(1)}%`],
    ]);
    const json = JSON.parse((await contextctl(cd.address, "--json", "session", "t-1")).stdout) as { storedBytes: string; agentUsage: Record<string, unknown> };
    expect(Number(json.storedBytes)).toBe(stored);
    expect(json.agentUsage).toMatchObject({ agentId: "tight", sessions: 1, maxStoredBytes: 6000 });

    const all = await contextctl(cd.address, "sessions");
    expect(all.code).toBe(0);
    const [sessions, agents] = tables(all.stdout);
    expect(sessions.find((r) => r[0] === "t-1")?.[7]).toBe(n(stored));
    expect(agents.find((r) => r[0] === "tight")).toEqual(["tight", "1", n(stored)]);
    expect(agents.find((r) => r[0] === "roomy")?.[1]).toBe("4");
  });
});
