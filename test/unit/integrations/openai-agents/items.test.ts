import { describe, expect, it } from "vitest";
import { Message, Role, textBlock } from "contextd/client";
import { itemToMessage, messageToItem } from "@contextd/openai-agents";
import { ITEMS } from "../../../fixtures/openai-agents-items.js";

/** Through the wire format and back, as contextd stores and returns it. */
const overTheWire = (m: Message): Message => Message.decode(Message.encode(m).finish());

describe("the Agents SDK item ↔ contextd Message mapping", () => {
  for (const [name, item] of Object.entries(ITEMS)) {
    it(`gives back a ${name} item exactly as it was added, through contextd's wire format`, () => {
      expect(messageToItem(overTheWire(itemToMessage(item)))).toEqual(item);
    });
  }

  it("makes messages contextd accepts: content on every message but assistant ones and tool results, a tool call id on each result", () => {
    for (const item of Object.values(ITEMS)) {
      const m = itemToMessage(item);
      if (m.role !== Role.ROLE_ASSISTANT && m.role !== Role.ROLE_TOOL_RESULT) expect(m.content.length).toBeGreaterThan(0);
      if (m.role === Role.ROLE_TOOL_RESULT) expect(m.toolCallId).not.toBe("");
      if (m.role === Role.ROLE_CUSTOM) expect(m.customType).not.toBe("");
    }
  });

  it("stores what engines, search and compaction read as contextd's own fields", () => {
    const call = itemToMessage(ITEMS.functionCall);
    expect(call.role).toBe(Role.ROLE_ASSISTANT);
    expect(call.content[0].block).toMatchObject({ $case: "toolCall", value: { id: "call_1", name: "get_weather", argumentsJson: '{"city":"Paris"}' } });
    const result = itemToMessage(ITEMS.functionResultText);
    expect(result).toMatchObject({ role: Role.ROLE_TOOL_RESULT, toolCallId: "call_1", toolName: "get_weather" });
    expect(result.content[0].block).toMatchObject({ $case: "text", value: { text: "sunny, 21°C" } });
    expect(itemToMessage(ITEMS.userText)).toMatchObject({ role: Role.ROLE_USER, contentIsText: true });
    expect(itemToMessage(ITEMS.system).role).toBe(Role.ROLE_SYSTEM);
    expect(itemToMessage(ITEMS.reasoning).content[0].block).toMatchObject({ $case: "thinking", value: { thinking: "The user wants weather." } });
    expect(itemToMessage(ITEMS.shellCall)).toMatchObject({ role: Role.ROLE_CUSTOM, customType: "openai-agents:shell_call" });
  });

  it("gives back the text an engine rewrote, not the text that was added", () => {
    const m = itemToMessage(ITEMS.functionResultText);
    m.content = [textBlock("[output trimmed by the engine]")];
    expect(messageToItem(m)).toEqual({ ...ITEMS.functionResultText, output: "[output trimmed by the engine]" });
  });

  it("reads messages contextd made itself (the compaction summary) by their role", () => {
    const summary = Message.fromPartial({
      role: Role.ROLE_USER,
      content: [textBlock("Summary of earlier turns")],
      metadata: { "contextd.kind": "compaction_summary" },
    });
    expect(messageToItem(summary)).toEqual({ role: "user", content: "Summary of earlier turns" });
    const assistant = Message.fromPartial({ role: Role.ROLE_ASSISTANT, content: [textBlock("engine note")] });
    expect(messageToItem(assistant)).toEqual({ role: "assistant", status: "completed", content: [{ type: "output_text", text: "engine note" }] });
  });
});
