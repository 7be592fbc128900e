import { describe, expect, it } from "vitest";
import { EngineStatus, QuarantineState } from "../../../src/contract/gen/contextd/v1/registry.js";
import { clock, engineState } from "../../../src/cli/format.js";

/** The `state` column of `contextctl engines`: routed to, or quarantined and until when (engines-commands.test.ts runs it for real). */
describe("engineState", () => {
  const now = Date.UTC(2026, 0, 2, 14, 0, 0);
  const engine = (q?: Partial<QuarantineState>) => EngineStatus.fromPartial({ engineId: "e", quarantine: q && QuarantineState.fromPartial(q) });

  it("active when not quarantined", () => {
    expect(engineState(engine(), now)).toBe("active");
  });

  it("manual: held, with the operator's reason", () => {
    expect(engineState(engine({ operation: "manual", reason: "maint", manual: true }), now)).toBe("quarantined (manual: maint)");
  });

  it("automatic: until the earliest release, in local time; past it, until a health check passes", () => {
    const q = { operation: "assemble", reason: "deadline: 10s passed", releaseAtMs: now + 190_000 };
    expect(engineState(engine(q), now)).toBe(`quarantined until ${clock(now + 190_000)} (assemble: deadline: 10s passed)`);
    expect(clock(now + 190_000)).toMatch(/^\d\d:\d\d:10$/); // local time of day: the seconds do not depend on the time zone
    expect(engineState(engine(q), now + 190_000)).toBe("quarantined until a health check passes (assemble: deadline: 10s passed)");
  });
});
