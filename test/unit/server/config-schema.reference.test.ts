/**
 * docs/configuration.md is the one configuration reference, and its tables are generated from the
 * config schema (scripts/config-reference.mjs): this fails when the file differs from what the schema
 * and the descriptions yield — a key added, removed or given another default without
 * `npm run docs:config` — or when a key has no description.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { replaceReference } from "../../../scripts/config-reference.mjs";
import * as summarizerConfig from "../../../src/compaction/summarizer/summarizer-config.js";
import * as configSchema from "../../../src/server/config-schema.js";
import * as duration from "../../../src/server/duration.js";

const FILE = path.resolve(import.meta.dirname, "../../../docs/configuration.md");

describe("docs/configuration.md", () => {
  it("is what `npm run docs:config` generates from the config schema", () => {
    const text = readFileSync(FILE, "utf8");
    const generated = replaceReference(text, { ...configSchema, ...duration, ...summarizerConfig });
    // toBe shows the first difference; the message says how to fix it.
    expect(text, "docs/configuration.md is stale: run `npm run docs:config`").toBe(generated);
  });
});
