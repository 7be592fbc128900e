import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../../src/server/config.js";
import { compileSettings } from "../../../src/server/settings.js";

describe("compileSettings", () => {
  it("turns the config's defaults into the settings each component takes, converting nothing twice", () => {
    const s = compileSettings(defaultConfig());
    expect(s.routing).toEqual({
      contextEngine: "legacy",
      agents: {},
      timeoutsMs: { ingest: 5000, assemble: 10000, compact: 180000, after_turn: 30000, maintain: 60000, bootstrap: 60000, subagent: 10000, forget: 30000 },
      onFailure: "fallback",
      maxConcurrentCalls: 64,
      fallbackReserveMs: 1000,
      locality: { replica: "", node: hostname(), zone: "" },
      overrides: {},
    });
    expect(s.tenants).toEqual({ maxCallsInFlight: 16, maxCallsInFlightPerAgent: 32, appendBytesPerSecond: 8388608, maxWatchStreams: 16, maxCallsRunning: 2 });
    expect(s.compaction).toEqual({ reserveTokens: 16384, keepRecentTokens: 20000, summaryMaxChars: 16000, coldCacheCompactRatio: 0 });
    expect(s.health).toEqual({ storePingIntervalMs: 1000, storePingTimeoutMs: 5000, drainDelayMs: 0, shutdownGraceMs: 10000 });
    expect(s.server).toEqual({ maxConcurrentCalls: 1000, heapGrowthPercent: 100 });
    expect([s.reconcileIntervalMs, s.subagentSweepIntervalMs]).toEqual([5000, 5000]);
  });

  it("keeps a per-engine override's unset keys unset, so the engine-wide value applies", () => {
    const config = defaultConfig();
    config.engines.overrides = { slow: { timeouts: { compact: 300000 } }, tight: { timeouts: {}, on_failure: "strict", max_concurrent_calls: 2 } };
    expect(compileSettings(config).routing.overrides).toEqual({
      slow: { timeoutsMs: { compact: 300000 } },
      tight: { timeoutsMs: {}, onFailure: "strict", maxConcurrentCalls: 2 },
    });
  });
});
