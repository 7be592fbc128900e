import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { promptBudget } from "../../../src/compaction/native-compaction.js";

describe("promptBudget", () => {
  it("is the window minus the reserve when that leaves enough room", () => {
    expect(promptBudget(128_000, 16_384)).toBe(111_616);
    expect(promptBudget(200_000, 0)).toBe(200_000);
  });

  it("never falls below min(8000, half the window)", () => {
    expect(promptBudget(20_000, 16_384)).toBe(8_000); // 3 616 would be left
    expect(promptBudget(16_384, 16_384)).toBe(8_000);
    expect(promptBudget(10_000, 16_384)).toBe(5_000); // half the window < 8000
    expect(promptBudget(8_001, 100_000)).toBe(4_000); // floor(8001 / 2)
    expect(promptBudget(1, 16_384)).toBe(0);
  });

  it("is exactly the floor at the boundary", () => {
    expect(promptBudget(24_384, 16_384)).toBe(8_000);
    expect(promptBudget(24_385, 16_384)).toBe(8_001);
  });

  it("never exceeds the window, even with a negative or missing reserve", () => {
    expect(promptBudget(4_000, -500)).toBe(4_000);
    expect(promptBudget(4_000, Number.NaN)).toBe(4_000);
  });

  it("is 0 for a non-positive window", () => {
    expect(promptBudget(0, 0)).toBe(0);
    expect(promptBudget(-10, 0)).toBe(0);
  });

  it("satisfies its bounds for any window and reserve", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2_000_000 }), fc.integer({ min: 0, max: 2_000_000 }), (window, reserve) => {
        const p = promptBudget(window, reserve);
        expect(Number.isInteger(p)).toBe(true);
        expect(p).toBeLessThanOrEqual(window);
        expect(p).toBeGreaterThanOrEqual(Math.min(8_000, Math.floor(window / 2)));
        expect(p).toBeGreaterThanOrEqual(Math.min(window, window - reserve));
        // monotone: a larger reserve never yields a larger budget
        expect(promptBudget(window, reserve + 1)).toBeLessThanOrEqual(p);
      }),
    );
  });
});
