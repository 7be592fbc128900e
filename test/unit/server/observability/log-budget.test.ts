import { describe, expect, it } from "vitest";
import { LogBudget } from "../../../../src/server/observability/log-budget.js";

describe("LogBudget", () => {
  it("lets through at most its lines per key and second, and the next line says how many were held back", () => {
    let now = 0;
    const budget = new LogBudget(3, () => now);
    const first = Array.from({ length: 10 }, () => budget.take("Assemble 8"));
    expect(first.map((t) => t.log)).toEqual([true, true, true, false, false, false, false, false, false, false]);
    expect(budget.take("Append 8").log).toBe(true); // another key has a budget of its own
    now = 999;
    expect(budget.take("Assemble 8").log).toBe(false);
    now = 1000;
    expect(budget.take("Assemble 8")).toEqual({ log: true, suppressed: 8 });
    expect(budget.take("Assemble 8")).toEqual({ log: true, suppressed: 0 });
  });

  it("holds at most its bound of keys", () => {
    const budget = new LogBudget(1, () => 0, 2);
    budget.take("a");
    budget.take("b");
    budget.take("c"); // over the bound: the windows start again
    expect(budget.take("a").log).toBe(true);
  });
});
