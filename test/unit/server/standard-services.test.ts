/**
 * ContextdHealth and StorePing (src/server/standard-services.ts) in process: the health status that
 * load balancers see follows the store's pings, a hung ping counts as failed after its timeout and
 * is never doubled, and draining is for good. The database-faults test shows the same with a real
 * PostgreSQL server going down.
 */
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ContextdHealth, StorePing, type ServingStatus } from "../../../src/server/standard-services.js";

const silent = pino({ level: "silent" });

function changes(health: ContextdHealth): Array<{ status: ServingStatus; why: string }> {
  const out: Array<{ status: ServingStatus; why: string }> = [];
  health.onChange((status, why) => out.push({ status, why }));
  return out;
}

describe("the store ping", () => {
  it("NOT_SERVING while pings fail, naming the store's error; SERVING after the first that succeeds", async () => {
    const health = new ContextdHealth(["contextd.v1.SessionService"]);
    const seen = changes(health);
    expect(health.status).toBe("NOT_SERVING");
    health.listening();
    expect(health.status).toBe("SERVING");
    let fail: Error | undefined = new Error("PostgreSQL store at db:5432/contextd is unavailable: connect ECONNREFUSED");
    const store = { ping: () => (fail ? Promise.reject(fail) : Promise.resolve()) };
    const ping = new StorePing(store, health, { storePingIntervalMs: 60_000, storePingTimeoutMs: 1_000 }, silent);
    await ping.tick();
    expect(health.status).toBe("NOT_SERVING");
    expect(health.reason).toBe("store unreachable: PostgreSQL store at db:5432/contextd is unavailable: connect ECONNREFUSED");
    await ping.tick();
    fail = undefined;
    await ping.tick();
    expect(health.status).toBe("SERVING");
    expect(seen.map((c) => c.status)).toEqual(["SERVING", "NOT_SERVING", "SERVING"]);
    ping.stop();
  });

  it("a ping that hangs fails at its timeout, and the next tick does not send another", async () => {
    const health = new ContextdHealth([]);
    health.listening();
    let calls = 0;
    let release!: () => void;
    const store = {
      ping: () => {
        calls++;
        return new Promise<void>((resolve) => (release = resolve));
      },
    };
    const ping = new StorePing(store, health, { storePingIntervalMs: 60_000, storePingTimeoutMs: 50 }, silent);
    const notServing = new Promise<string>((resolve) => health.onChange((s, why) => s === "NOT_SERVING" && resolve(why)));
    const first = ping.tick();
    expect(await notServing).toMatch(/did not answer a ping within 50 ms/);
    await ping.tick(); // still pending: skipped
    expect(calls).toBe(1);
    release();
    await first;
    // The late answer does not count; the next ping does.
    expect(health.status).toBe("NOT_SERVING");
    const next = ping.tick();
    release();
    await next;
    expect(calls).toBe(2);
    expect(health.status).toBe("SERVING");
  });

  it("draining is NOT_SERVING for good, whatever the store says", async () => {
    const health = new ContextdHealth([]);
    health.listening();
    const ping = new StorePing({ ping: () => Promise.resolve() }, health, { storePingIntervalMs: 60_000, storePingTimeoutMs: 1_000 }, silent);
    health.drain();
    ping.stop();
    await ping.tick();
    health.storeReachable(true);
    expect(health.status).toBe("NOT_SERVING");
    expect(health.reason).toBe("draining (shutting down)");
  });
});
