/**
 * Issue 10, part 5 (SQLite, one process): a child session whose `ttl_ms` passed is swept — its
 * engine (a real sidecar, the TypeScript test engine with the subagents capability) hears
 * OnSubagentEnded with reason SWEPT, once — and the child is kept, marked ended, so that an
 * EndSubagent afterwards does not tell the engine again (with DELETED it still deletes the child).
 * The same with two replicas on PostgreSQL: test/replicas/subagent-ttl.test.ts.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode, SubagentContextMode, SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession } from "../fixtures/coding-session.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";

const ENGINE = "ttl-engine";
const FORK = SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK;
const ISOLATED = SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED;

describe("subagent TTL on one contextd (SQLite)", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;
  const parent = { sessionId: "ttl-parent", agentId: "coder" };

  const ended = (sessionId: string) => engine.events().filter((e) => e.event === "subagent_ended" && e.session_id === sessionId);
  const swept = (sessionId: string) => engine.waitForEvent((e) => e.event === "subagent_ended" && e.session_id === sessionId, 15_000);
  /** Everything the engine wrote before this returns has been read: an Assemble it answers is behind it on its stdout. */
  async function barrier(): Promise<void> {
    const from = engine.events().length;
    expect((await cx.assemble({ session: parent, tokenBudget: 200_000 })).engineId).toBe(ENGINE);
    await engine.waitForEvent((e, i) => i >= from && e.event === "call" && e.op === "assemble");
  }

  beforeAll(async () => {
    contextd = await startContextd({ config: { slots: { context_engine: ENGINE }, subagents: { sweep_interval: "100ms" } } });
    engine = await startTsEngine({ engineId: ENGINE, registry: contextd.address, owner: "acme", capabilities: ["subagents"], heartbeatMs: 3_600_000 });
    expect(await engine.registered).toMatchObject({ ok: true });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    await cx.appendMessages({ session: parent, messages: codingSession({ turns: 3, seed: 5 }).messages });
  });
  afterAll(async () => {
    cx?.close();
    await engine?.stop();
    await contextd?.cleanup();
  });

  it("a child whose ttl_ms passed is swept: the engine hears SWEPT once; the child is kept, marked ended", async () => {
    const spawnedAt = Date.now();
    const spawn = await cx.prepareSubagentSpawn({ parent, child: { sessionId: "ttl-1", agentId: "coder" }, contextMode: FORK, ttlMs: 300 });
    expect(spawn).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    await cx.prepareSubagentSpawn({ parent, child: { sessionId: "no-ttl", agentId: "coder" }, contextMode: ISOLATED });
    await cx.prepareSubagentSpawn({ parent, child: { sessionId: "ended-first", agentId: "coder" }, contextMode: ISOLATED, ttlMs: 300 });
    expect(
      await cx.endSubagent({ child: { sessionId: "ended-first", agentId: "coder" }, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED }),
    ).toMatchObject({ engineId: ENGINE });

    const event = await swept("ttl-1");
    expect(event.reason).toBe("SUBAGENT_END_REASON_SWEPT");
    expect(Date.now() - spawnedAt).toBeGreaterThanOrEqual(300);
    const logged = await contextd.waitForLog((l) => l.msg === "subagent swept: its ttl_ms passed" && l.sessionId === "ttl-1");
    expect(logged).toMatchObject({ parentSessionId: "ttl-parent", engineId: ENGINE });

    // Later sweeps (another child's, well after) do not sweep it again.
    await cx.prepareSubagentSpawn({ parent, child: { sessionId: "ttl-2", agentId: "coder" }, contextMode: ISOLATED, ttlMs: 300 });
    await swept("ttl-2");
    await barrier();
    expect(ended("ttl-1").map((e) => e.reason)).toEqual(["SUBAGENT_END_REASON_SWEPT"]);
    expect(ended("ended-first").map((e) => e.reason)).toEqual(["SUBAGENT_END_REASON_COMPLETED"]);
    expect(ended("no-ttl")).toEqual([]);

    // Kept: readable and writable as before.
    const info = (await cx.getSession({ session: { sessionId: "ttl-1" } })).info!;
    expect(info.parentSessionId).toBe("ttl-parent");
    expect(info.entryCount).toBe(spawn.childEntryCount);
    await cx.appendMessages({ session: { sessionId: "ttl-1", agentId: "coder" }, messages: [user("one more thing")] });
  });

  it("EndSubagent after a sweep (or a second EndSubagent) does not tell the engine again; DELETED still deletes", async () => {
    const child = { sessionId: "ttl-1", agentId: "coder" };
    expect(await cx.endSubagent({ child, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED })).toMatchObject({ engineId: ENGINE });
    await cx.endSubagent({ child, reason: SubagentEndReason.SUBAGENT_END_REASON_DELETED });
    const gone = (await cx.getSession({ session: child }).catch((e: unknown) => e)) as ServiceError;
    expect(gone.code).toBe(status.NOT_FOUND);

    const noTtl = { sessionId: "no-ttl", agentId: "coder" };
    await cx.endSubagent({ child: noTtl, reason: SubagentEndReason.SUBAGENT_END_REASON_RELEASED });
    await cx.endSubagent({ child: noTtl, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED });
    await barrier();
    expect(ended("ttl-1").map((e) => e.reason)).toEqual(["SUBAGENT_END_REASON_SWEPT"]);
    expect(ended("no-ttl").map((e) => e.reason)).toEqual(["SUBAGENT_END_REASON_RELEASED"]);
    expect(contextd.logLines().filter((l) => l.msg === "subagent had already ended: the engine is not told again").length).toBe(3);
  });

  it("an out-of-range ttl_ms is refused", async () => {
    const err = (await cx
      .prepareSubagentSpawn({ parent, child: { sessionId: "ttl-huge" }, contextMode: ISOLATED, ttlMs: Number.MAX_SAFE_INTEGER })
      .catch((e: unknown) => e)) as ServiceError;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("ttl_ms");
  });
});
