import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/server/config.js";
import { reconcileIntervalMs, subagentSweepIntervalMs } from "../../../src/server/config-schema.js";

// engines.reconcile_interval (registry sync across replicas) and subagents.sweep_interval (subagent
// TTLs): optional, so that a config without them loads exactly as before (config.test.ts).

const dir = mkdtempSync(join(tmpdir(), "contextd-config-sync-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const load = (yaml: string, env: NodeJS.ProcessEnv = {}) => {
  const path = join(dir, `c${n++}.yaml`);
  writeFileSync(path, yaml);
  return loadConfig({ file: path, env });
};

describe("engines.reconcile_interval and subagents.sweep_interval", () => {
  it("default to 5 s each when absent, and stay absent from the loaded config", () => {
    const c = load("");
    expect(c.engines.reconcile_interval).toBeUndefined();
    expect(c.subagents).toBeUndefined();
    expect(reconcileIntervalMs(c)).toBe(5_000);
    expect(subagentSweepIntervalMs(c)).toBe(5_000);
  });

  it("take durations from the file and from the environment", () => {
    const c = load("engines: { reconcile_interval: 750ms }\nsubagents: { sweep_interval: 2s }\n");
    expect(reconcileIntervalMs(c)).toBe(750);
    expect(subagentSweepIntervalMs(c)).toBe(2_000);
    const e = load("", { CONTEXTD_ENGINES__RECONCILE_INTERVAL: "1m", CONTEXTD_SUBAGENTS__SWEEP_INTERVAL: "100ms" });
    expect(reconcileIntervalMs(e)).toBe(60_000);
    expect(subagentSweepIntervalMs(e)).toBe(100);
    expect(subagentSweepIntervalMs(load("subagents: {}\n"))).toBe(5_000);
  });

  it("refuse what is no duration, and unknown keys, naming them", () => {
    expect(() => load("engines: { reconcile_interval: 5 }\n")).toThrow(ConfigError);
    expect(() => load("engines: { reconcile_interval: 5 }\n")).toThrow(/engines\.reconcile_interval/);
    expect(() => load("subagents: { sweep_interval: soon }\n")).toThrow(/subagents\.sweep_interval/);
    expect(() => load("subagents: { sweep: 1s }\n")).toThrow(/subagents\.sweep/);
  });
});
