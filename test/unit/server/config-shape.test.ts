import { describe, expect, it } from "vitest";
import { containersAt, knownKeys } from "../../../src/server/config-shape.js";

// The shape is read from the schema's JSON Schema: these pin what the env-override mapping and the
// "did you mean" hints rely on, so a change in how zod renders a schema shows here first.
describe("config shape", () => {
  it("lists the top-level sections", () => {
    expect(knownKeys([])).toEqual(expect.arrayContaining(["listen", "store", "auth", "engines", "compaction", "limits", "tracing"]));
  });

  it("tells sections, maps and lists apart", () => {
    expect(containersAt(["engines", "timeouts"]).map((c) => c.kind)).toEqual(["section"]);
    expect(containersAt(["slots", "agents"]).map((c) => c.kind)).toEqual(["map"]);
    expect(containersAt(["auth", "runtimes"]).map((c) => c.kind)).toEqual(["list"]);
    expect(knownKeys(["auth", "runtimes", 0])).toEqual(expect.arrayContaining(["token_env", "token_sha256", "name", "agents"]));
    expect(knownKeys(["auth", "owners", "team-a"])).toEqual(expect.arrayContaining(["token_env", "token_sha256", "engines"]));
  });

  it("gives a single value no container, and a path that cannot exist nothing", () => {
    expect(containersAt(["listen"])).toEqual([]);
    expect(containersAt(["engines", "nope"])).toEqual([]);
    expect(containersAt(["auth", "runtimes", "x"])).toEqual([]);
  });

  it("merges the keys of every option of a union (the summarizer kinds)", () => {
    const keys = knownKeys(["compaction", "summarizer"]);
    expect(keys).toEqual(expect.arrayContaining(["kind", "base_url", "model", "api_key_env", "temperature"]));
  });

  it("sees through optional sections and prefaults", () => {
    expect(knownKeys(["health"])).toEqual(expect.arrayContaining(["store_ping_interval", "drain_delay", "shutdown_grace"]));
    expect(knownKeys(["engines", "overrides", "lossless", "timeouts"])).toContain("compact");
  });
});
