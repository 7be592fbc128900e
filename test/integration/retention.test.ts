/**
 * Retention, all real processes: contextd with `retention.agents.<agent>.max_idle` of a few
 * seconds and a 200 ms sweep, a sidecar engine that implements ForgetSession (the misbehaving test
 * engine, `capabilities.forget`). `contextctl sessions --expiring` lists the session that will go
 * and not the one no limit applies to; the sweep deletes it once it has been idle that long, its
 * engine hears ForgetSession with reason RETENTION_IDLE, and `contextd_sessions_deleted_total`
 * counts it under `retention_idle`. The other agent's session (no limit: the default keeps every
 * session) stays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ForgetReason } from "../../src/contract/gen/contextd/v1/engine.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { contextctl, tableRows } from "../cli/run-contextctl.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";

const ENGINE = "forgetful";
const IDLE = 3_000;

describe("retention deletes idle sessions through the deletion path", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        slots: { context_engine: ENGINE },
        retention: { sweep_interval: "200ms", agents: { shortlived: { max_idle: `${IDLE}ms` } } },
        forget: { poll_interval: "100ms", backoff: { initial: "100ms", max: "500ms" } },
      },
    });
    engine = await startTsEngine({ engineId: ENGINE, registry: contextd.address, owner: "acme", capabilities: ["forget"] });
    expect(await engine.registered).toMatchObject({ ok: true });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    cx?.close();
    await engine?.stop();
    await contextd?.cleanup();
  });

  it("an agent's session idle past its max_idle is listed as expiring, then deleted, and its engine told why; another agent's stays", async () => {
    const doomed = { sessionId: "idle-one", agentId: "shortlived" };
    const kept = { sessionId: "kept-one", agentId: "keeper" };
    const before = Date.now();
    await cx.appendMessages({ session: doomed, messages: [user("this conversation may go")] });
    await cx.appendMessages({ session: kept, messages: [user("this one stays")] });

    const listed = await contextctl(contextd.address, "sessions", "--expiring", "1h");
    expect(listed.code, listed.stderr).toBe(0);
    const rows = tableRows(listed.stdout);
    expect(rows.map((r) => r[0])).toEqual(["idle-one"]);
    const expires = Date.parse(rows[0]!.at(-1)!);
    expect(expires).toBeGreaterThanOrEqual(before + IDLE);
    expect(expires).toBeLessThanOrEqual(Date.now() + IDLE);
    // Within 1 s nothing is due yet.
    expect((await cx.listSessions({ expiringWithinMs: 1 })).sessions).toEqual([]);

    const gone = await contextd.waitForLog((l) => l.msg === "retention deleted a session" && l.sessionId === "idle-one", 20_000);
    expect(gone).toMatchObject({ cause: "idle", agentId: "shortlived" });
    expect(Date.now()).toBeGreaterThanOrEqual(expires);
    const heard = await engine.waitForEvent((e) => e.event === "forgotten" && e.session_id === "idle-one", 20_000);
    expect(heard.reason).toBe(ForgetReason.FORGET_REASON_RETENTION_IDLE);
    await contextd.waitForLog((l) => l.msg === "engine forgot the deleted session" && l.sessionId === "idle-one", 20_000);

    await expect(cx.getSession({ session: doomed })).rejects.toMatchObject({ code: 5 });
    expect((await cx.getSession({ session: kept })).info?.expiresAtMs).toBe(0);
    const metrics = await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text();
    expect(metrics).toMatch(/^contextd_sessions_deleted_total\{reason="retention_idle"\} 1$/m);
    expect(metrics).toMatch(/^contextd_forget_deliveries_total\{engine="forgetful",outcome="delivered"\} 1$/m);
  }, 60_000);
});
