import { describe, expect, it } from "vitest";
import { CancelledError } from "../../../src/contract/errors.js";
import { DEFAULT_TENANT_LIMITS, TenantLimits, type Turn } from "../../../src/contract/tenant-limits.js";

const limits = (maxCallsRunning: number) => new TenantLimits({ ...DEFAULT_TENANT_LIMITS, maxCallsRunning });
const never = new AbortController().signal;

/** Whether `p` has settled by the time the microtask queue drains. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("tenant turns: a few calls per tenant do work at once, the rest wait in order", () => {
  it("a tenant's call over max_calls_running waits until one of its calls leaves, while another tenant's call starts at once", async () => {
    const l = limits(2);
    const a1 = await l.turn("runtime a", never);
    await l.turn("runtime a", never);
    const a3 = l.turn("runtime a", never);
    expect(await settled(a3)).toBe(false);
    expect(await settled(l.turn("runtime b", never))).toBe(true);
    a1.leave();
    expect(await settled(a3)).toBe(true);
  });

  it("waiting calls get their turns in the order they came", async () => {
    const l = limits(1);
    const first = await l.turn("runtime a", never);
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => l.turn("runtime a", never).then((t) => (order.push(n), t)));
    first.leave();
    for (const w of waiting) (await w).leave();
    expect(order).toEqual([1, 2, 3]);
  });

  it("a call whose caller goes while it waits is dropped with CancelledError, and does not hold a turn", async () => {
    const l = limits(1);
    const first = await l.turn("runtime a", never);
    const gone = new AbortController();
    const dropped = l.turn("runtime a", gone.signal);
    const next = l.turn("runtime a", never);
    gone.abort();
    await expect(dropped).rejects.toBeInstanceOf(CancelledError);
    first.leave();
    expect(await settled(next)).toBe(true);
  });

  it("a call waiting on an engine (away) gives its turn to the tenant's next call, and takes one back at once when the engine answers", async () => {
    const l = limits(1);
    const slow: Turn = await l.turn("runtime a", never);
    let answer!: (v: string) => void;
    const engine = slow.away(() => new Promise<string>((resolve) => (answer = resolve)));
    const other = await l.turn("runtime a", never); // runs while the first waits on its engine
    const third = l.turn("runtime a", never);
    answer("ok");
    // Not held behind `other`: the tenant's running calls may be waiting for it (a shared Bootstrap).
    await expect(engine).resolves.toBe("ok");
    other.leave();
    expect(await settled(third)).toBe(false); // two running, over the limit of one: no new turn yet
    slow.leave();
    expect(await settled(third)).toBe(true);
  });

  it("calls waiting for the answer of a call that is away do not deadlock it", async () => {
    const l = limits(2);
    const first = await l.turn("runtime a", never);
    let answer!: () => void;
    const shared = first.away(() => new Promise<void>((resolve) => (answer = resolve)));
    // Two more calls take the tenant's two turns and wait for the first call's work (a shared Bootstrap).
    const waiters = [0, 1].map(async () => {
      const t = await l.turn("runtime a", never);
      await shared;
      t.leave();
    });
    answer();
    await shared;
    first.leave();
    await Promise.all(waiters);
  });

  it("calls without a tenant (auth off) are not held", async () => {
    const l = limits(1);
    await l.turn(undefined, never);
    expect(await settled(l.turn(undefined, never))).toBe(true);
  });
});
