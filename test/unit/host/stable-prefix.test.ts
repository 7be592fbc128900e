/**
 * StablePrefixes: the previous answer per session, compared as a provider sees messages, within a
 * memory bound.
 */
import { describe, expect, it } from "vitest";
import { Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import { StablePrefixes } from "../../../src/host/stable-prefix.js";

const msg = (text: string) => textMessage(Role.ROLE_USER, text);
const ten = () => 10;

describe("StablePrefixes", () => {
  it("compares messages as a provider sees them: ids and stored counts do not matter, content does", () => {
    const p = new StablePrefixes();
    p.measure("s", "", [msg("a"), msg("b")], ten);
    expect(p.measure("s", "", [{ ...msg("a"), id: "x", tokenCount: 3 }, msg("b"), msg("c")], ten)).toEqual({ messages: 2, tokens: 20 });
    expect(p.measure("s", "", [msg("a"), msg("B"), msg("c")], ten)).toEqual({ messages: 1, tokens: 10 });
  });

  it("a changed system prompt addition makes nothing stable (the runtime puts it before its system prompt)", () => {
    const p = new StablePrefixes();
    p.measure("s", "recalled 1", [msg("a")], ten);
    expect(p.measure("s", "recalled 2", [msg("a")], ten)).toEqual({ messages: 0, tokens: 0 });
    expect(p.measure("s", "recalled 2", [msg("a")], ten)).toEqual({ messages: 1, tokens: 10 });
  });

  it("stays within its byte bound by forgetting the least recently assembled session, which then reports 0", () => {
    const p = new StablePrefixes(1_000);
    const many = Array.from({ length: 40 }, (_, i) => msg(`m${i}`));
    p.measure("old", "", many, ten);
    p.measure("new", "", many, ten);
    p.measure("newer", "", many, ten);
    expect(p.measure("newer", "", many, ten).messages).toBe(40);
    expect(p.measure("old", "", many, ten).messages).toBe(0);
  });
});
