import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { engineLatency, quantile } from "../../../../src/server/observability/engine-latency.js";

describe("engineLatency", () => {
  it("estimates p50 and p99 per engine and operation from the histogram's buckets, as histogram_quantile", async () => {
    const h = new Histogram({
      name: "contextd_engine_call_duration_seconds",
      help: "x",
      labelNames: ["engine", "operation"] as const,
      buckets: [0.01, 0.1, 1],
      registers: [new Registry()],
    });
    for (let i = 0; i < 98; i++) h.observe({ engine: "spy", operation: "assemble" }, 0.005);
    h.observe({ engine: "spy", operation: "assemble" }, 0.5);
    h.observe({ engine: "spy", operation: "assemble" }, 5);
    const l = await engineLatency(h);
    expect(l.spy.assemble.calls).toBe(100);
    // 50 of 98 in the first bucket (0..10 ms): linear within it.
    expect(l.spy.assemble.p50Ms).toBeCloseTo((50 / 98) * 10, 6);
    // The 99th call is in the 0.1..1 s bucket.
    expect(l.spy.assemble.p99Ms).toBeCloseTo(1000, 6);
    expect(Object.keys(l)).toEqual(["spy"]);
  });

  it("the +Inf bucket answers the highest finite bound; no calls, no figure", () => {
    expect(
      quantile(0.99, [
        [1, 0],
        [Infinity, 3],
      ]),
    ).toBe(1);
    expect(quantile(0.5, [[Infinity, 0]])).toBeNaN();
  });
});
