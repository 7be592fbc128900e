import { describe, expect, it } from "vitest";
import { observeAll, type EngineCallObserver } from "../../../src/registry/engine-call-observer.js";
import type { RegisteredEngine } from "../../../src/registry/engine-registry.js";

describe("observeAll", () => {
  it("tells every observer every event, in order, and nests their arounds with the first outermost", async () => {
    const heard: string[] = [];
    const named = (name: string): EngineCallObserver => ({
      async around(_id, _op, trace, call) {
        heard.push(`${name} in`);
        const value = await call({ ...trace, [name]: "1" });
        heard.push(`${name} out`);
        return value;
      },
      started: () => heard.push(`${name} started`),
      ended: (c) => heard.push(`${name} ended ${c.outcome}`),
      fellBack: (f) => heard.push(`${name} fell back ${f.kind}`),
      rejected: () => heard.push(`${name} rejected`),
    });
    const all = observeAll(named("a"), undefined, { ended: () => heard.push("counters ended") }, named("b"));
    const engine = { id: "e1" } as RegisteredEngine;
    const trace = await all.around!("e1", "assemble", { traceparent: "t" }, async (t) => t);
    expect(trace).toEqual({ traceparent: "t", a: "1", b: "1" });
    all.started!(engine, "assemble");
    all.ended!({ engine, op: "assemble", outcome: "timeout", seconds: 1, reason: "slow" });
    all.fellBack!({ selectedId: "e1", op: "assemble", kind: "timeout", reason: "slow" });
    all.rejected!(engine, "assemble", "full");
    expect(heard).toEqual([
      "a in",
      "b in",
      "b out",
      "a out",
      "a started",
      "b started",
      "a ended timeout",
      "counters ended",
      "b ended timeout",
      "a fell back timeout",
      "b fell back timeout",
      "a rejected",
      "b rejected",
    ]);
  });

  it("has no around when no observer wraps the call, so the call is made directly", () => {
    expect(observeAll({ ended: () => undefined }, undefined).around).toBeUndefined();
  });
});
