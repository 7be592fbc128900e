/**
 * ModelSpend: an agent's hour of the summarizer model — the call that crosses a limit is allowed,
 * the next refused; spend leaves the window after an hour; named agents have their own limits; the
 * agents tracked are bounded.
 */
import { describe, expect, it } from "vitest";
import { ModelSpend, ModelSpendLimitedError } from "../../../src/llm/model-spend.js";

const limits = (callsPerHour: number, tokensPerHour: number, agents: Record<string, [number, number]> = {}) => ({
  default: { callsPerHour, tokensPerHour },
  agents: new Map(Object.entries(agents).map(([a, [c, t]]) => [a, { callsPerHour: c, tokensPerHour: t }])),
});

describe("ModelSpend", () => {
  it("allows while under both limits, refuses once one is reached, and names the limit", () => {
    const spend = new ModelSpend(limits(0, 1_000));
    spend.check("a", "summary");
    spend.record("a", "summary", 1, 1_500);
    const err = (() => {
      try {
        spend.check("a", "complete");
      } catch (e) {
        return e;
      }
    })() as ModelSpendLimitedError;
    expect(err).toBeInstanceOf(ModelSpendLimitedError);
    expect(err.message).toBe('Complete: agent "a" used 1500 model tokens in the last hour, its compaction.summarizer.limits.tokens_per_hour is 1000');
    expect(err.detail.metadata).toMatchObject({ limit: "compaction.summarizer.limits.tokens_per_hour", limit_value: 1_000, used: 1_500, attempts: 0 });
    // Another agent has its own hour.
    expect(() => spend.check("b", "summary")).not.toThrow();
  });

  it("spend leaves the window an hour later (within its 5-minute buckets)", () => {
    let now = Date.UTC(2026, 11, 6, 10, 0, 0);
    const spend = new ModelSpend(limits(2, 0), () => now);
    spend.record("a", "summary", 2, 10);
    expect(() => spend.check("a", "summary")).toThrow(ModelSpendLimitedError);
    now += 30 * 60_000;
    expect(() => spend.check("a", "summary")).toThrow(ModelSpendLimitedError);
    now += 35 * 60_000;
    expect(spend.used("a")).toEqual({ calls: 0, tokens: 0 });
    expect(() => spend.check("a", "summary")).not.toThrow();
  });

  it("a named agent's limit replaces the default; 0 there is no limit", () => {
    const spend = new ModelSpend(limits(1, 0, { roomy: [0, 0], tight: [0, 5] }));
    for (let i = 0; i < 5; i++) spend.record("roomy", "summary", 1, 100);
    expect(() => spend.check("roomy", "summary")).not.toThrow();
    spend.record("tight", "summary", 1, 5);
    expect(() => spend.check("tight", "summary")).toThrow(/tokens_per_hour is 5/);
  });

  it("tracks at most maxAgents agents, forgetting the least recently active", () => {
    const spend = new ModelSpend(limits(1, 0), Date.now, 2);
    spend.record("a", "summary", 1, 1);
    spend.record("b", "summary", 1, 1);
    spend.record("c", "summary", 1, 1);
    expect(spend.used("a")).toEqual({ calls: 0, tokens: 0 });
    expect(spend.used("c")).toEqual({ calls: 1, tokens: 1 });
  });

  it("tells its observer of every request and refusal, limited or not", () => {
    const seen: string[] = [];
    const spend = new ModelSpend(limits(1, 0, { free: [0, 0] }));
    spend.observe({ spent: (p, r, t) => seen.push(`spent ${p} ${r} ${t}`), limited: (p) => seen.push(`limited ${p}`) });
    spend.record("free", "complete", 2, 30);
    spend.record("a", "summary", 1, 10);
    expect(() => spend.check("a", "summary")).toThrow();
    expect(seen).toEqual(["spent complete 2 30", "spent summary 1 10", "limited summary"]);
  });
});
