/**
 * How one contextd drains on SIGTERM (Contextd.shutdown), what lets a replica be restarted behind a
 * load balancer without failing calls:
 *
 * 1. grpc.health.v1 turns NOT_SERVING first, while calls are still served for health.drain_delay;
 * 2. then it takes no new calls (new connections are refused, existing ones get a GOAWAY) and
 *    ends its Watch streams;
 * 3. calls in flight finish and are answered, within health.shutdown_grace;
 * 4. it exits 0.
 *
 * A call still running when the grace period ends is cancelled; a second signal cuts the drain
 * delay short. The slow call is an Assemble routed to a test engine that takes its time ("slow").
 */
import { status } from "@grpc/grpc-js";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Mode, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { loadConfig } from "../../src/server/config.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { healthWatch, type HealthWatch } from "../helpers/health.js";
import { refusal } from "../helpers/registry-client.js";

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A contextd whose sessions go to a registered test engine that answers Assemble after `slowMs`. */
async function withSlowEngine(health: Record<string, string>, slowMs: number): Promise<{ cd: ContextdProcess; engine: EngineProcess; cx: ContextdClient }> {
  const cd = await startContextd({
    config: { slots: { context_engine: "slowpoke" }, engines: { timeouts: { assemble: "60s" } }, health },
  });
  cleanup.push(() => cd.cleanup());
  const engine = await startTsEngine({ engineId: "slowpoke", registry: cd.address, owner: "team", control: { assemble: "slow", slow_ms: slowMs } });
  cleanup.push(() => engine.kill9());
  expect(await engine.registered).toMatchObject({ ok: true });
  const cx = new ContextdClient({ address: cd.address, timeoutMs: 60_000 });
  cleanup.push(() => cx.close());
  await cx.appendMessages({ session: { sessionId: "s1" }, messages: [textMessage(Role.ROLE_USER, "hello")] });
  return { cd, engine, cx };
}

function watchHealth(address: string): HealthWatch {
  const w = healthWatch(address);
  cleanup.push(() => w.close());
  return w;
}

describe("contextd on SIGTERM", () => {
  it("says NOT_SERVING first, still serves during drain_delay, then refuses new calls and answers the calls in flight", async () => {
    const { cd, engine, cx } = await withSlowEngine({ drain_delay: "1500ms", shutdown_grace: "30s" }, 4_000);
    const watch = watchHealth(cd.address);
    await watch.next("SERVING");

    const inFlight = cx.assemble({ session: { sessionId: "s1" }, tokenBudget: 10_000 });
    await engine.waitForEvent((e) => e.event === "call" && e.op === "assemble");
    const exited = cd.stop("SIGTERM", 60_000);

    // 1. NOT_SERVING, and calls are still served.
    await watch.next("NOT_SERVING", 1);
    const during = await cx.getSession({ session: { sessionId: "s1" } });
    expect(during.info?.entryCount).toBe(1);

    // 2. No new calls once the drain delay is over; the health Watch stream was ended (OK).
    await cd.waitForLog((l) => l.msg === "contextd stopped taking new calls; waiting for the calls in flight", 30_000);
    expect(await watch.ended).toMatchObject({ code: status.OK });
    const fresh = new ContextdClient({ address: cd.address, timeoutMs: 5_000 });
    cleanup.push(() => fresh.close());
    const refused = await refusal(fresh.getSession({ session: { sessionId: "s1" } }));
    expect(refused.code, refused.details).toBe(status.UNAVAILABLE);

    // 3. The call in flight is answered by the engine that had it.
    const answer = await inFlight;
    expect(answer).toMatchObject({ engineId: "slowpoke", mode: Mode.MODE_NORMAL });

    // 4. A clean exit, after the calls finished.
    expect(await exited).toBe(0);
    const msgs = cd.logLines().map((l) => l.msg);
    const order = [
      "contextd draining: health NOT_SERVING",
      "contextd stopped taking new calls; waiting for the calls in flight",
      "contextd stopped taking calls; the calls in flight finished",
    ];
    expect(order.map((m) => msgs.indexOf(m))).toEqual([...order.map((m) => msgs.indexOf(m))].sort((a, b) => a - b));
    for (const m of order) expect(msgs).toContain(m);
    expect(msgs).not.toContain("health.shutdown_grace expired: calls still in flight were cancelled");
    const draining = cd.logLines().find((l) => l.msg === "contextd draining: health NOT_SERVING")!;
    expect(draining).toMatchObject({ drain_delay_ms: 1500, shutdown_grace_ms: 30_000 });
  });

  it("cancels a call still running when shutdown_grace ends, and exits 0", async () => {
    const { cd, engine, cx } = await withSlowEngine({ shutdown_grace: "500ms" }, 30_000);
    const inFlight = refusal(cx.assemble({ session: { sessionId: "s1" }, tokenBudget: 10_000 }));
    await engine.waitForEvent((e) => e.event === "call" && e.op === "assemble");
    const started = Date.now();
    expect(await cd.stop("SIGTERM", 60_000)).toBe(0);
    // Well before the engine's 30 s answer (generous for a loaded machine).
    expect(Date.now() - started).toBeLessThan(20_000);
    const err = await inFlight;
    expect([status.CANCELLED, status.UNAVAILABLE, status.INTERNAL]).toContain(err.code);
    expect(cd.logLines().map((l) => l.msg)).toContain("health.shutdown_grace expired: calls still in flight were cancelled");
  });

  it("a second SIGTERM cuts the drain delay short", async () => {
    const cd = await startContextd({ config: { health: { drain_delay: "10m" } } });
    cleanup.push(() => cd.cleanup());
    const watch = watchHealth(cd.address);
    await watch.next("SERVING");
    process.kill(cd.pid, "SIGTERM");
    await cd.waitForLog((l) => l.msg === "contextd draining: health NOT_SERVING");
    await watch.next("NOT_SERVING", 1);
    process.kill(cd.pid, "SIGTERM");
    expect(await cd.exited).toBe(0);
    expect(cd.logLines().map((l) => l.msg)).toContain("second signal: skipping the rest of the drain delay");
  });
});

describe("the health config", () => {
  const empty = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "contextd-health-config-")), "empty.yaml");
  fs.writeFileSync(empty, "# nothing\n");
  it("is optional; absent, the defaults are a store ping every 1 s (5 s timeout), no drain delay and a 10 s grace", () => {
    const cfg = loadConfig({ env: {}, file: empty });
    expect(cfg.health).toEqual({ store_ping_interval: 1000, store_ping_timeout: 5000, drain_delay: 0, shutdown_grace: 10_000 });
  });

  it("takes durations, 0s for the drain delay, and environment overrides", () => {
    const cfg = loadConfig({ env: { CONTEXTD_HEALTH__DRAIN_DELAY: "2s", CONTEXTD_HEALTH__STORE_PING_INTERVAL: "250ms" }, file: empty });
    expect(cfg.health).toEqual({ store_ping_interval: 250, store_ping_timeout: 5000, drain_delay: 2000, shutdown_grace: 10_000 });
    expect(() => loadConfig({ env: { CONTEXTD_HEALTH__SHUTDOWN_GRACE: "0s" }, file: empty })).toThrow(/health\.shutdown_grace/);
    expect(() => loadConfig({ env: { CONTEXTD_HEALTH__PING: "1s" }, file: empty })).toThrow(/health/);
  });
});
