import { describe, expect, it } from "vitest";
import { EngineEvent, EngineEventType, EngineHealth, EngineStatus, QuarantineState } from "../../../src/contract/gen/contextd/v1/registry.js";
import { clock, engineState, eventLine } from "../../../src/cli/format.js";

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

/** One `contextctl engines watch` line: the engine's state, and the instance the event is about. */
describe("eventLine", () => {
  const event = (instanceId: string) =>
    EngineEvent.fromPartial({
      type: EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED,
      engine: EngineStatus.fromPartial({ engineId: "recall", owner: "acme", health: EngineHealth.ENGINE_HEALTH_SERVING }),
      atMs: Date.UTC(2026, 0, 2, 14, 0, 0),
      message: "assemble: timeout: 2s passed",
      instanceId,
    });

  it("names the instance last, quoted when it is not a plain word", () => {
    expect(eventLine(event("recall-2"))).toBe(
      '2026-01-02T14:00:00.000Z QUARANTINED recall owner=acme health=SERVING quarantine=none message="assemble: timeout: 2s passed" instance=recall-2',
    );
    expect(eventLine(event("pod a"))).toMatch(/ instance="pod a"$/);
  });

  it("has no instance field for an event about the engine as a whole", () => {
    expect(eventLine(event(""))).not.toContain("instance=");
  });
});
