import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/server/config.js";

// engines.reconcile_interval (registry sync across replicas) and subagents.sweep_interval (subagent
// TTLs): optional in the file, with their defaults in the schema.

const dir = mkdtempSync(join(tmpdir(), "contextd-config-sync-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const load = (yaml: string, env: NodeJS.ProcessEnv = {}) => {
  const path = join(dir, `c${n++}.yaml`);
  writeFileSync(path, yaml);
  return loadConfig({ file: path, env });
};

describe("engines.reconcile_interval and subagents.sweep_interval", () => {
  it("default to 5 s each when absent", () => {
    const c = load("");
    expect(c.engines.reconcile_interval).toBe(5_000);
    expect(c.subagents.sweep_interval).toBe(5_000);
  });

  it("take durations from the file and from the environment", () => {
    const c = load("engines: { reconcile_interval: 750ms }\nsubagents: { sweep_interval: 2s }\n");
    expect(c.engines.reconcile_interval).toBe(750);
    expect(c.subagents.sweep_interval).toBe(2_000);
    const e = load("", { CONTEXTD_ENGINES__RECONCILE_INTERVAL: "1m", CONTEXTD_SUBAGENTS__SWEEP_INTERVAL: "100ms" });
    expect(e.engines.reconcile_interval).toBe(60_000);
    expect(e.subagents.sweep_interval).toBe(100);
    expect(load("subagents: {}\n").subagents.sweep_interval).toBe(5_000);
  });

  it("refuse what is no duration, and unknown keys, naming them", () => {
    expect(() => load("engines: { reconcile_interval: 5 }\n")).toThrow(ConfigError);
    expect(() => load("engines: { reconcile_interval: 5 }\n")).toThrow(/engines\.reconcile_interval/);
    expect(() => load("subagents: { sweep_interval: soon }\n")).toThrow(/subagents\.sweep_interval/);
    expect(() => load("subagents: { sweep: 1s }\n")).toThrow(/subagents\.sweep/);
  });
});
