/**
 * withDeadline (src/registry/deadline.ts), in process: the bound every engine call runs under. The
 * integration tests show it against real sidecars; these pin its own contract, with fake timers
 * where time matters, so that nothing here waits on the wall clock.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CancelledError, DeadlineExceededError } from "../../../src/contract/errors.js";
import { withDeadline } from "../../../src/registry/deadline.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("withDeadline", () => {
  it("answers what the work answers, and hands it the deadline and a live signal", async () => {
    const deadline = Date.now() + 60_000;
    const seen: { deadlineMs?: number; aborted?: boolean } = {};
    const answer = await withDeadline(deadline, undefined, "Assemble on e", async (ctx) => {
      seen.deadlineMs = ctx.deadlineMs;
      seen.aborted = ctx.signal.aborted;
      return 42;
    });
    expect(answer).toBe(42);
    expect(seen).toEqual({ deadlineMs: deadline, aborted: false });
  });

  it("settles at the deadline with DEADLINE_EXCEEDED even when the work ignores its signal; the late result is dropped", async () => {
    vi.useFakeTimers();
    let signal: AbortSignal | undefined;
    let finishLate!: (v: string) => void;
    const call = withDeadline(Date.now() + 500, undefined, "Compact on hung", (ctx) => {
      signal = ctx.signal;
      return new Promise<string>((resolve) => (finishLate = resolve));
    });
    const settled = expect(call).rejects.toThrow(DeadlineExceededError);
    await vi.advanceTimersByTimeAsync(500);
    await settled;
    await expect(call).rejects.toThrow("Compact on hung: deadline of 500ms exceeded");
    // The work under way is told in the next turn of the event loop, after the rejection (and the
    // fallback answer it leads to) has gone out.
    await vi.runAllTimersAsync();
    expect(signal!.aborted).toBe(true);
    expect(signal!.reason).toBeInstanceOf(DeadlineExceededError);
    finishLate("too late"); // nothing observes it, nothing throws
  });

  it("a deadline already past hands the work an aborted signal: work that honours it fails DEADLINE_EXCEEDED at once", async () => {
    // The work is still called (an in-process answer that is already there is not thrown away —
    // the legacy fallback runs within what is left of the runtime's deadline), but it is told.
    await expect(
      withDeadline(Date.now() - 1, undefined, "Ingest on e", async (ctx) => {
        if (ctx.signal.aborted) throw ctx.signal.reason;
        return "x";
      }),
    ).rejects.toThrow(DeadlineExceededError);
  });

  it("the caller's cancellation settles it with CANCELLED and aborts the work's signal", async () => {
    const caller = new AbortController();
    let signal: AbortSignal | undefined;
    const call = withDeadline(Date.now() + 60_000, caller.signal, "Assemble on e", (ctx) => {
      signal = ctx.signal;
      return new Promise<never>(() => undefined);
    });
    caller.abort();
    await expect(call).rejects.toThrow(CancelledError);
    await expect(call).rejects.toThrow("Assemble on e: cancelled by the caller");
    expect(signal!.reason).toBeInstanceOf(CancelledError);
  });

  it("an already-cancelled caller: the work's signal is aborted with CANCELLED before it starts", async () => {
    const caller = new AbortController();
    caller.abort();
    let reason: unknown;
    const call = withDeadline(Date.now() + 60_000, caller.signal, "Maintain on e", (ctx) => {
      reason = ctx.signal.reason;
      return new Promise<never>(() => undefined);
    });
    await expect(call).rejects.toThrow(CancelledError);
    expect(reason).toBeInstanceOf(CancelledError);
  });

  it("an unbounded deadline (Infinity) sets no timer; the work's own error passes through", async () => {
    vi.useFakeTimers();
    const boom = new Error("engine said no");
    await expect(withDeadline(Number.POSITIVE_INFINITY, undefined, "Assemble on e", async () => Promise.reject(boom))).rejects.toBe(boom);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("leaves no timer and no listener behind once settled", async () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const remove = vi.spyOn(caller.signal, "removeEventListener");
    await withDeadline(Date.now() + 10_000, caller.signal, "Assemble on e", async () => "ok");
    expect(vi.getTimerCount()).toBe(0);
    expect(remove).toHaveBeenCalledWith("abort", expect.any(Function));
  });
});
