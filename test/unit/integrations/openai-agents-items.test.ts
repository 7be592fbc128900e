import { describe, expect, it } from "vitest";
import type { AgentInputItem } from "@openai/agents";
import { Message, Role, textBlock } from "contextd/client";
import { itemToMessage, messageToItem } from "@contextd/openai-agents";

// One item of every kind the Agents SDK hands a session, with the optional fields set (ids,
// providerData, statuses), so that a field the mapping drops shows as a difference.
const ITEMS: Record<string, AgentInputItem> = {
  userText: { role: "user", content: "What is the weather in Paris?" },
  userParts: {
    type: "message",
    role: "user",
    id: "msg_u1",
    content: [
      { type: "input_text", text: "Look at this" },
      { type: "input_image", image: "https://example.test/cat.png", detail: "low" },
      { type: "input_file", file: "data:application/pdf;base64,AAAA", filename: "a.pdf" },
    ],
    providerData: { cache: true },
  },
  system: { role: "system", content: "Be brief." },
  assistant: {
    type: "message",
    role: "assistant",
    id: "msg_a1",
    status: "completed",
    content: [
      { type: "output_text", text: "It is sunny.", providerData: { annotations: [] } },
      { type: "refusal", refusal: "I cannot say more." },
    ],
  },
  functionCall: {
    type: "function_call",
    id: "fc_1",
    callId: "call_1",
    name: "get_weather",
    arguments: '{"city":"Paris"}',
    status: "completed",
    providerData: { x: 1 },
  },
  functionResultText: { type: "function_call_result", callId: "call_1", name: "get_weather", status: "completed", output: "sunny, 21°C" },
  functionResultObject: { type: "function_call_result", callId: "call_2", name: "lookup", status: "completed", output: { type: "text", text: "found it" } },
  functionResultParts: {
    type: "function_call_result",
    callId: "call_3",
    name: "screenshot",
    status: "incomplete",
    output: [
      { type: "input_text", text: "the page" },
      { type: "input_image", image: "data:image/png;base64,AAAA" },
    ],
  },
  handoffCall: { type: "function_call", callId: "call_h", name: "transfer_to_billing", arguments: "{}", status: "completed" },
  handoffResult: { type: "function_call_result", callId: "call_h", name: "transfer_to_billing", status: "completed", output: '{"assistant":"billing"}' },
  reasoning: {
    type: "reasoning",
    id: "rs_1",
    content: [{ type: "input_text", text: "The user wants weather." }],
    rawContent: [{ type: "reasoning_text", text: "raw chain" }],
    providerData: { encrypted_content: "opaque" },
  },
  hostedToolCall: { type: "hosted_tool_call", id: "ws_1", name: "web_search_call", arguments: '{"q":"x"}', status: "completed", output: "results" },
  computerCall: { type: "computer_call", id: "cc_1", callId: "call_c", status: "completed", action: { type: "click", x: 1, y: 2, button: "left" } },
  computerResult: { type: "computer_call_result", callId: "call_c", output: { type: "computer_screenshot", data: "data:image/png;base64,AAAA" } },
  shellCall: { type: "shell_call", callId: "call_s", status: "completed", action: { commands: ["ls"], timeoutMs: 1000 } },
  shellResult: { type: "shell_call_output", callId: "call_s", output: [{ stdout: "a\n", stderr: "", outcome: { type: "exit", exitCode: 0 } }] },
  applyPatchCall: { type: "apply_patch_call", callId: "call_p", status: "completed", operation: { type: "delete_file", path: "a.txt" } },
  applyPatchResult: { type: "apply_patch_call_output", callId: "call_p", status: "completed", output: "done" },
  compaction: { type: "compaction", encrypted_content: "opaque-compaction" },
  unknown: { type: "unknown", id: "u1", providerData: { anything: [1, 2] } },
} as unknown as Record<string, AgentInputItem>;

/** Through the wire format and back, as contextd stores and returns it. */
const overTheWire = (m: Message): Message => Message.decode(Message.encode(m).finish());

describe("the Agents SDK item ↔ contextd Message mapping", () => {
  for (const [name, item] of Object.entries(ITEMS)) {
    it(`gives back a ${name} item exactly as it was added, through contextd's wire format`, () => {
      expect(messageToItem(overTheWire(itemToMessage(item)))).toEqual(item);
    });
  }

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
