import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/server/config.js";

// Map keys a variable's name cannot spell (`Team-A`, `a.b`): a YAML map value replaces the whole
// map; `@merge <mapping>` merges into it (src/server/config-env-merge.ts).

const dir = mkdtempSync(join(tmpdir(), "contextd-config-merge-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const load = (yaml: string, env: NodeJS.ProcessEnv) => {
  const path = join(dir, `c${n++}.yaml`);
  writeFileSync(path, yaml);
  return loadConfig({ file: path, env });
};
function problem(yaml: string, env: NodeJS.ProcessEnv): string {
  try {
    load(yaml, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).not.toContain("\n");
    return (e as Error).message;
  }
  throw new Error("expected a ConfigError");
}

// auth off: with auth required, a slot may name only engine ids some owner reserves.
const FILE =
  "auth: { required: false }\nslots:\n  agents: { coder: window }\nengines:\n  overrides:\n    Team-A: { on_failure: strict, timeouts: { compact: 5m } }\n";

describe("env overrides for map keys that are not upper-case-safe", () => {
  it("a new key from a name is lower-cased with _ kept: it cannot be Team-A", () => {
    expect(load(FILE, { CONTEXTD_SLOTS__AGENTS__TEAM_A: "lossless" }).slots.agents).toEqual({ coder: "window", team_a: "lossless" });
  });

  it("a YAML map value spells any key and replaces the whole map", () => {
    const cfg = load(FILE, { CONTEXTD_SLOTS__AGENTS: '{Team-A: lossless, "a.b": window}' });
    expect(cfg.slots.agents).toEqual({ "Team-A": "lossless", "a.b": "window" });
  });

  it("@merge adds and replaces keys, spelled exactly, and keeps the file's others", () => {
    const cfg = load(FILE, { CONTEXTD_SLOTS__AGENTS: '@merge {Team-A: lossless, "a.b": window}' });
    expect(cfg.slots.agents).toEqual({ coder: "window", "Team-A": "lossless", "a.b": "window" });
    expect(load(FILE, { CONTEXTD_SLOTS__AGENTS: "@merge {coder: lossless}" }).slots.agents).toEqual({ coder: "lossless" });
  });

  it("@merge merges mappings all the way down; a scalar or a list replaces; null removes a key", () => {
    const cfg = load(FILE, {
      CONTEXTD_ENGINES__OVERRIDES: "@merge {Team-A: {timeouts: {assemble: 2s}}, Team-B: {max_concurrent_calls: 4}}",
      CONTEXTD_SLOTS__AGENTS: "@merge {coder: null, Team-A: lossless}",
      CONTEXTD_ENGINES: "@merge {allow_endpoints: [10.0.0.0/8]}",
    });
    expect(cfg.engines.overrides).toEqual({
      "Team-A": { on_failure: "strict", timeouts: { compact: 300_000, assemble: 2000 } },
      "Team-B": { max_concurrent_calls: 4, timeouts: {} },
    });
    expect(cfg.slots.agents).toEqual({ "Team-A": "lossless" });
    expect(cfg.engines.allow_endpoints).toEqual(["10.0.0.0/8"]);
    expect(cfg.engines.timeouts.compact).toBe(180_000); // the rest of the section untouched
  });

  it("@merge creates a section the file lacks, and works on a list item", () => {
    const cfg = load("auth: { required: false, runtimes: [ { token_env: A, agents: [x] } ] }\n", {
      CONTEXTD_ENGINES__OVERRIDES: "@merge {My.Engine: {on_failure: strict}}",
      CONTEXTD_AUTH__RUNTIMES__0: "@merge {agents: [Team-A]}",
    });
    expect(cfg.engines.overrides).toEqual({ "My.Engine": { on_failure: "strict", timeouts: {} } });
    expect(cfg.auth.runtimes).toEqual([{ token_env: "A", agents: ["Team-A"] }]);
  });

  it("a deeper variable applies after a @merge and matches the merged key case-insensitively", () => {
    const cfg = load(FILE, { CONTEXTD_SLOTS__AGENTS: "@merge {Team-A: lossless}", CONTEXTD_SLOTS__AGENTS__TEAM_A: "window" });
    expect(cfg.slots.agents).toEqual({ coder: "window", "Team-A": "window" });
  });

  it("bad @merge forms are one line naming the variable", () => {
    const cases: Array<[NodeJS.ProcessEnv, string]> = [
      [
        { CONTEXTD_SLOTS__AGENTS: "@merge" },
        'config: CONTEXTD_SLOTS__AGENTS: "@merge" needs a YAML mapping after it, e.g. @merge {Team-A: lossless}; got nothing',
      ],
      [
        { CONTEXTD_SLOTS__AGENTS: "@merge [a, b]" },
        'config: CONTEXTD_SLOTS__AGENTS: "@merge" needs a YAML mapping after it, e.g. @merge {Team-A: lossless}; got ["a","b"]',
      ],
      [
        { CONTEXTD_SLOTS__AGENTS: "@merge lossless" },
        'config: CONTEXTD_SLOTS__AGENTS: "@merge" needs a YAML mapping after it, e.g. @merge {Team-A: lossless}; got "lossless"',
      ],
      [{ CONTEXTD_SLOTS__AGENTS: "@merge {Team-A: lossless" }, expect.stringMatching(/^config: CONTEXTD_SLOTS__AGENTS: "@merge": invalid YAML: .+[^:]$/)],
      [{ CONTEXTD_SLOTS__AGENTS: "@merge{Team-A: lossless}" }, 'config: CONTEXTD_SLOTS__AGENTS: write "@merge" then a space, then a YAML mapping'],
      [{ CONTEXTD_LISTEN: "@merge {a: 1}" }, 'config: CONTEXTD_LISTEN: "@merge" needs a section or a map, and listen is a single value'],
      [
        { CONTEXTD_ENGINES__ALLOW_ENDPOINTS: "@merge {a: 1}" },
        'config: CONTEXTD_ENGINES__ALLOW_ENDPOINTS: "@merge" needs a section or a map, and engines.allow_endpoints is a list (set it whole, or an item by index)',
      ],
    ];
    for (const [env, message] of cases) expect(problem(FILE, env)).toEqual(message);
    expect(problem("auth: { required: false }\nslots: { agents: oops }\n", { CONTEXTD_SLOTS__AGENTS: "@merge {a: b}" })).toBe(
      'config: slots.agents (from env CONTEXTD_SLOTS__AGENTS): is "oops" in the file, not a section',
    );
  });

  it("a bad key or value a @merge wrote names the variable; the file's own keys in that map do not", () => {
    expect(problem(FILE, { CONTEXTD_ENGINES__TIMEOUTS: "@merge {compct: 2s}" })).toBe(
      'config: unknown key "engines.timeouts.compct" (did you mean "compact"?) (from env CONTEXTD_ENGINES__TIMEOUTS)',
    );
    expect(problem(FILE, { CONTEXTD_ENGINES__OVERRIDES: "@merge {Team-B: {on_failure: never}}" })).toBe(
      'config: engines.overrides.Team-B.on_failure (from env CONTEXTD_ENGINES__OVERRIDES): "never" is not one of fallback, strict',
    );
    const badFile = "auth: { required: false }\nengines:\n  overrides:\n    Team-A: { on_failure: never }\n";
    expect(problem(badFile, { CONTEXTD_ENGINES__OVERRIDES: "@merge {Team-B: {on_failure: strict}}" })).toBe(
      'config: engines.overrides.Team-A.on_failure: "never" is not one of fallback, strict',
    );
  });
});
