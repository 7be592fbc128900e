/**
 * The reason table of docs/concepts.md ("Error reasons") is generated from
 * proto/contextd/v1/errors.proto (scripts/error-reasons.mjs): this fails when the file differs from
 * what the proto yields — a reason added or its comment changed without `npm run docs:errors`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { replaceErrorReasons } from "../../../scripts/error-reasons.mjs";

const ROOT = path.resolve(import.meta.dirname, "../../..");

describe("docs/concepts.md error reasons", () => {
  it("is what `npm run docs:errors` generates from proto/contextd/v1/errors.proto", () => {
    const text = readFileSync(path.join(ROOT, "docs/concepts.md"), "utf8");
    const generated = replaceErrorReasons(text, readFileSync(path.join(ROOT, "proto/contextd/v1/errors.proto"), "utf8"));
    expect(text, "docs/concepts.md is stale: run `npm run docs:errors`").toBe(generated);
  });
});
