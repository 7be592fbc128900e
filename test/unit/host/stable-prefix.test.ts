/**
 * StablePrefixes: the previous answer per session, compared as a provider sees messages, within a
 * memory bound.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { ImageBlock, Message, Role, TextBlock, ThinkingBlock, ToolCallBlock, type ContentBlock } from "../../../src/contract/gen/contextd/v1/types.js";
import { rememberEncoding } from "../../../src/contract/encoded-messages.js";
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

  it("every field of every content block a provider receives is part of the digest", () => {
    const kinds: [string, Record<string, unknown>][] = [
      ["text", TextBlock.fromPartial({}) as unknown as Record<string, unknown>],
      ["image", ImageBlock.fromPartial({}) as unknown as Record<string, unknown>],
      ["thinking", ThinkingBlock.fromPartial({}) as unknown as Record<string, unknown>],
      ["toolCall", ToolCallBlock.fromPartial({}) as unknown as Record<string, unknown>],
    ];
    for (const [kind, blank] of kinds) {
      const withBlock = (value: Record<string, unknown>): Message =>
        Message.fromPartial({ role: Role.ROLE_ASSISTANT, content: [{ block: { $case: kind, value } } as unknown as ContentBlock] });
      // Every field the generated type has, so a field added to the contract is covered or fails here.
      for (const field of Object.keys(blank)) {
        const changed = { ...blank, [field]: typeof blank[field] === "string" ? "x" : typeof blank[field] === "boolean" ? true : Buffer.from([1]) };
        const p = new StablePrefixes();
        p.measure("s", "", [withBlock(blank)], ten);
        expect(p.measure("s", "", [withBlock(changed)], ten).messages, `${kind}.${field}`).toBe(0);
      }
    }
  });

  it("a tool result's call id, name and error flag are part of the digest; timestamps, usage and metadata are not", () => {
    const base = Message.fromPartial({
      role: Role.ROLE_TOOL_RESULT,
      toolCallId: "c1",
      toolName: "read",
      content: [{ block: { $case: "text", value: TextBlock.fromPartial({ text: "ok" }) } }],
    });
    const same = [{ timestampMs: 5 }, { usage: { input: 3, output: 4, cacheRead: 0, cacheWrite: 0, total: 7 } }, { metadata: { k: "v" } }];
    const differ = [{ toolCallId: "c2" }, { toolName: "write" }, { isError: true }, { role: Role.ROLE_USER }];
    for (const change of same) {
      const p = new StablePrefixes();
      p.measure("s", "", [base], ten);
      expect(p.measure("s", "", [{ ...base, ...change } as Message], ten).messages, JSON.stringify(change)).toBe(1);
    }
    for (const change of differ) {
      const p = new StablePrefixes();
      p.measure("s", "", [base], ten);
      expect(p.measure("s", "", [{ ...base, ...change } as Message], ten).messages, JSON.stringify(change)).toBe(0);
    }
  });

  it("a stored (frozen) view message digests as the same message decoded afresh", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: "grapheme", maxLength: 40 }), { minLength: 1, maxLength: 6 }), (texts) => {
        const fresh = texts.map(msg);
        const stored = texts.map((t) => rememberEncoding(msg(t), Message.encode(msg(t)).finish()));
        const p = new StablePrefixes();
        p.measure("s", "", stored, ten);
        expect(p.measure("s", "", fresh, ten).messages).toBe(texts.length);
        // And the remembered digest of a stored message is not reused for a different one.
        expect(p.measure("s", "", [...stored.slice(0, -1), msg(`${texts.at(-1)}!`)], ten).messages).toBe(texts.length - 1);
      }),
    );
  });

  it("messages differing in one character anywhere, or only in where text splits between blocks, differ", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 2, maxLength: 200 }), fc.nat(), (text, at) => {
        const i = at % text.length;
        const changed = text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ 1) + text.slice(i + 1);
        const p = new StablePrefixes();
        p.measure("s", "", [msg(text)], ten);
        expect(p.measure("s", "", [msg(changed)], ten).messages).toBe(0);
        const split = Message.fromPartial({
          role: Role.ROLE_USER,
          content: [text.slice(0, i), text.slice(i)].map((t) => ({ block: { $case: "text", value: TextBlock.fromPartial({ text: t }) } }) as ContentBlock),
        });
        const q = new StablePrefixes();
        q.measure("s", "", [msg(text)], ten);
        expect(q.measure("s", "", [split], ten).messages).toBe(0);
      }),
    );
  });
});
