import { describe, expect, it } from "vitest";
import { colourWanted } from "../../../src/cli/style.js";

/** When contextctl colours stdout: a terminal, unless NO_COLOR / --no-color; FORCE_COLOR forces it. */
describe("colourWanted", () => {
  const tty = { isTTY: true };
  const pipe = { isTTY: false };

  it("colours a terminal and not a pipe by default", () => {
    expect(colourWanted(tty, {})).toBe(true);
    expect(colourWanted(pipe, {})).toBe(false);
    expect(colourWanted(tty, { TERM: "dumb" })).toBe(false);
  });

  it("FORCE_COLOR colours a pipe, unless it is 0 or false", () => {
    expect(colourWanted(pipe, { FORCE_COLOR: "1" })).toBe(true);
    expect(colourWanted(pipe, { FORCE_COLOR: "" })).toBe(true);
    expect(colourWanted(tty, { FORCE_COLOR: "0" })).toBe(false);
    expect(colourWanted(tty, { FORCE_COLOR: "false" })).toBe(false);
  });

  it("NO_COLOR (non-empty) and --no-color always win", () => {
    expect(colourWanted(tty, { NO_COLOR: "1" })).toBe(false);
    expect(colourWanted(pipe, { NO_COLOR: "1", FORCE_COLOR: "1" })).toBe(false);
    expect(colourWanted(tty, { NO_COLOR: "" })).toBe(true);
    expect(colourWanted(tty, { FORCE_COLOR: "1" }, false)).toBe(false);
  });
});
