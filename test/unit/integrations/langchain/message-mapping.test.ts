import { AIMessage, ChatMessage, FunctionMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Message as MessageCodec, Role, textMessage } from "contextd/client";
import { fromContextd, messageKey, toContextd } from "@contextd/langchain";
import { describe, expect, it } from "vitest";

const png = Buffer.from([137, 80, 78, 71, 0, 1, 2, 255]).toString("base64");

/** Every LangChain message type, content form and optional field the mapping carries. */
const everyKind: BaseMessage[] = [
  new SystemMessage("You are terse."),
  new SystemMessage({ content: [{ type: "text", text: "Cached prefix.", cache_control: { type: "ephemeral" } }], id: "sys-1" }),
  new HumanMessage({ content: "Hello", id: "h1", name: "alice", additional_kwargs: { k: 1 }, response_metadata: { r: true } }),
  new HumanMessage({
    content: [
      { type: "text", text: "Look at these:" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${png}`, detail: "high" } },
      { type: "image_url", image_url: "https://example.com/a.png" },
      { type: "image", url: "https://example.com/b.png", mimeType: "image/png", metadata: { m: 1 } },
      { type: "image", data: png, mimeType: "image/png" },
      { type: "file", data: png, mimeType: "application/pdf", metadata: { filename: "c.pdf" } },
      { type: "input_audio", input_audio: { data: png, format: "wav" } },
    ],
  }),
  new AIMessage({
    content: "Calling tools.",
    id: "chatcmpl-1",
    name: "model",
    tool_calls: [
      { id: "c1", name: "read", args: { path: "x", deep: { n: [1, 2] } }, type: "tool_call" },
      { id: "c2", name: "web", args: {} },
    ],
    invalid_tool_calls: [{ id: "c9", name: "bad", args: "{not json", error: "bad JSON", type: "invalid_tool_call" }],
    additional_kwargs: { tool_calls: [{ id: "c1", type: "function", function: { name: "read", arguments: '{"path":"x"}' } }] },
    response_metadata: { finish_reason: "tool_calls", model_name: "m" },
    usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
  }),
  new AIMessage({ content: "", tool_calls: [{ id: "c3", name: "read", args: { path: "y" }, type: "tool_call" }] }),
  new AIMessage({
    content: [
      { type: "reasoning", reasoning: "Think first.", signature: "sig" },
      { type: "text", text: "Answer.", annotations: [] },
    ],
  }),
  new ToolMessage({ content: "file body", tool_call_id: "c1", name: "read", status: "success", artifact: { bytes: 9 }, metadata: { m: 2 }, id: "t1" }),
  new ToolMessage({ content: "ENOENT", tool_call_id: "c2", name: "web", status: "error" }),
  new ToolMessage({ content: "", tool_call_id: "c3" }),
  new ToolMessage({
    content: [
      { type: "text", text: "a screenshot" },
      { type: "image_url", image_url: `data:image/png;base64,${png}` },
    ],
    tool_call_id: "c4",
    name: "shot",
  }),
  new ChatMessage({ content: "a critic's note", role: "critic", id: "x1" }),
  new FunctionMessage({ content: "42", name: "legacy_fn" }),
];

/** What a LangChain message carries, field by field. */
function view(m: BaseMessage): Record<string, unknown> {
  const f = m as unknown as Record<string, unknown>;
  return {
    class: m.constructor.name,
    type: m.type,
    content: m.content,
    ...Object.fromEntries(
      [
        "id",
        "name",
        "additional_kwargs",
        "response_metadata",
        "tool_calls",
        "invalid_tool_calls",
        "usage_metadata",
        "tool_call_id",
        "status",
        "artifact",
        "metadata",
        "role",
      ]
        .filter((k) => f[k] !== undefined)
        .map((k) => [k, f[k]]),
    ),
  };
}

/** Through the wire form too, as contextd stores and returns it. */
const overTheWire = (messages: BaseMessage[]) => messages.map(toContextd).map((m) => MessageCodec.decode(MessageCodec.encode(m).finish()));

describe("LangChain message mapping", () => {
  it("brings every message type and content form back deep-equal after a trip through contextd's Message", () => {
    expect(fromContextd(overTheWire(everyKind)).map(view)).toEqual(everyKind.map(view));
  });

  it("puts what the model reads into contextd's fields: text, images, tool calls and arguments, tool results", () => {
    const [system, , human, images, ai, , reasoning, result, error] = everyKind.map(toContextd);
    expect(system).toMatchObject({ role: Role.ROLE_SYSTEM, contentIsText: true });
    expect(human.content[0].block).toMatchObject({ $case: "text", value: { text: "Hello" } });
    expect(images.content.map((c) => c.block?.$case)).toEqual(["text", "image", "image", "image", "image", "text", "text"]);
    expect(images.content[1].block).toMatchObject({ $case: "image", value: { mimeType: "image/png", uri: "" } });
    expect(images.content[2].block).toMatchObject({ $case: "image", value: { uri: "https://example.com/a.png" } });
    expect(images.content[5].block).toMatchObject({ $case: "text", value: { text: "[file]" } });
    expect(ai.role).toBe(Role.ROLE_ASSISTANT);
    expect(ai.content.map((c) => c.block?.$case)).toEqual(["text", "toolCall", "toolCall"]);
    expect(ai.content[1].block).toMatchObject({ $case: "toolCall", value: { id: "c1", name: "read", argumentsJson: '{"path":"x","deep":{"n":[1,2]}}' } });
    expect(reasoning.content[0].block).toMatchObject({ $case: "thinking", value: { thinking: "Think first." } });
    expect(result).toMatchObject({ role: Role.ROLE_TOOL_RESULT, toolCallId: "c1", toolName: "read", isError: false });
    expect(error).toMatchObject({ role: Role.ROLE_TOOL_RESULT, toolCallId: "c2", isError: true });
    const [chat, fn] = everyKind.slice(-2).map(toContextd);
    expect(chat).toMatchObject({ role: Role.ROLE_CUSTOM, customType: "langchain.generic" });
    expect(fn).toMatchObject({ role: Role.ROLE_CUSTOM, customType: "langchain.function" });
  });

  it("gives contextd's own messages (a compaction summary, another runtime's) their nearest LangChain form", () => {
    const summary = { ...textMessage(Role.ROLE_USER, "Summary of earlier turns"), metadata: { "contextd.kind": "compaction_summary" } };
    const custom = { ...textMessage(Role.ROLE_CUSTOM, "a note"), customType: "openclaw.note" };
    const [s, c] = fromContextd([summary, custom]);
    expect(HumanMessage.isInstance(s) && s.text).toBe("Summary of earlier turns");
    expect(HumanMessage.isInstance(c) && c.text).toBe("a note");
  });

  it("keys a message by its position and what the model reads, never by LangChain's ids or metadata", () => {
    const a = toContextd(
      new AIMessage({ content: "", id: "run-1", tool_calls: [{ id: "c1", name: "read", args: { a: 1, b: 2 } }], response_metadata: { x: 1 } }),
    );
    const b = toContextd(new AIMessage({ content: "", id: "run-2", tool_calls: [{ id: "c1", name: "read", args: { b: 2, a: 1 } }] }));
    expect(messageKey(3, a)).toBe(messageKey(3, b));
    expect(messageKey(3, a)).not.toBe(messageKey(5, a));
    expect(messageKey(1, toContextd(new HumanMessage("yes")))).not.toBe(messageKey(1, toContextd(new HumanMessage("no"))));
  });
});
