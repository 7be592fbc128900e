import type { LanguageModelV3Prompt } from "@ai-sdk/provider";
import { Message as MessageCodec, Role } from "contextd/client";
import { answerMessage, fromContextd, messageKey, toContextd } from "@contextd/ai-sdk";
import { describe, expect, it } from "vitest";

const png = new Uint8Array([137, 80, 78, 71, 0, 1, 2, 255]);
const opts = { someProvider: { cache: "ephemeral" } };

/** Every message and part type the SDK's prompt carries, with every optional field set. */
const everyPart: LanguageModelV3Prompt = [
  { role: "system", content: "You are terse.", providerOptions: opts },
  {
    role: "user",
    content: [
      { type: "text", text: "Look at these:", providerOptions: opts },
      { type: "file", mediaType: "image/png", data: png, filename: "a.png", providerOptions: opts },
      { type: "file", mediaType: "image/jpeg", data: "aGVsbG8=" },
      { type: "file", mediaType: "image/*", data: new URL("https://example.com/b.png") },
      { type: "file", mediaType: "application/pdf", data: png, filename: "c.pdf" },
      { type: "file", mediaType: "text/plain", data: new URL("https://example.com/d.txt") },
    ],
  },
  {
    role: "assistant",
    content: [
      { type: "reasoning", text: "Think first.", providerOptions: { anthropic: { signature: "sig" } } },
      { type: "text", text: "Calling tools." },
      { type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "x", deep: { n: [1, 2] } } },
      { type: "tool-call", toolCallId: "c2", toolName: "web", input: { q: "y" }, providerExecuted: true },
      { type: "tool-result", toolCallId: "c2", toolName: "web", output: { type: "json", value: { hits: 3 } } },
      { type: "file", mediaType: "image/png", data: png },
    ],
    providerOptions: opts,
  },
  {
    role: "tool",
    content: [
      { type: "tool-result", toolCallId: "c1", toolName: "read", output: { type: "text", value: "file body" }, providerOptions: opts },
      { type: "tool-result", toolCallId: "c3", toolName: "read", output: { type: "json", value: { a: [1, null, "b"] } } },
      { type: "tool-result", toolCallId: "c4", toolName: "read", output: { type: "error-text", value: "ENOENT" } },
      { type: "tool-result", toolCallId: "c5", toolName: "read", output: { type: "error-json", value: { code: 2 } } },
      { type: "tool-result", toolCallId: "c6", toolName: "rm", output: { type: "execution-denied", reason: "not allowed" } },
      {
        type: "tool-result",
        toolCallId: "c7",
        toolName: "shot",
        output: {
          type: "content",
          value: [
            { type: "text", text: "a screenshot" },
            { type: "image-data", data: "aGVsbG8=", mediaType: "image/png" },
          ],
        },
      },
      { type: "tool-approval-response", approvalId: "ap1", approved: false, reason: "no" },
    ],
    providerOptions: opts,
  },
  { role: "tool", content: [{ type: "tool-result", toolCallId: "c8", toolName: "read", output: { type: "text", value: "" } }] },
];

/** Through contextd's wire form and back: what the store hands back is what was encoded. */
function throughWire(prompt: LanguageModelV3Prompt): LanguageModelV3Prompt {
  const wire = prompt.flatMap(toContextd).map((m) => MessageCodec.decode(MessageCodec.encode(m).finish()));
  return fromContextd(wire);
}

/** URLs, bytes and undefined fields made visible to a deep comparison. */
function plain(v: unknown): unknown {
  if (v instanceof URL) return { url: v.href };
  if (v instanceof Uint8Array) return { bytes: [...v] };
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

describe("AI SDK message mapping", () => {
  it("is lossless both ways for every message and part type the SDK's prompt carries", () => {
    const back = throughWire(everyPart);
    expect(back).toEqual(everyPart);
    // toEqual sees no fields in a URL: compare the kinds and values of data as well.
    expect(plain(back)).toEqual(plain(everyPart));
  });

  it("gives contextd what engines read in its own fields: roles, text, reasoning, tool calls, results and errors", () => {
    const [system, user, assistant, ...results] = everyPart.flatMap(toContextd);
    expect(system.role).toBe(Role.ROLE_SYSTEM);
    expect(user.content.map((c) => c.block?.$case)).toEqual(["text", "image", "image", "image", "text", "text"]);
    expect(assistant.content.map((c) => c.block?.$case)).toEqual(["thinking", "text", "toolCall", "toolCall", "text", "image"]);
    expect(results.map((m) => [m.role, m.toolCallId, m.isError])).toEqual([
      [Role.ROLE_TOOL_RESULT, "c1", false],
      [Role.ROLE_TOOL_RESULT, "c3", false],
      [Role.ROLE_TOOL_RESULT, "c4", true],
      [Role.ROLE_TOOL_RESULT, "c5", true],
      [Role.ROLE_TOOL_RESULT, "c6", true],
      [Role.ROLE_TOOL_RESULT, "c7", false],
      [Role.ROLE_CUSTOM, "", false],
      [Role.ROLE_TOOL_RESULT, "c8", false],
    ]);
  });

  it("keys the model's answer as the SDK's next prompt carries it, and tells apart equal messages at other positions", () => {
    const answer = answerMessage([
      { type: "text", text: "" },
      { type: "reasoning", text: "hmm" },
      { type: "text", text: "Reading." },
      { type: "tool-call", toolCallId: "c1", toolName: "read", input: '{"z":1,"a":{"y":2,"b":3}}' },
    ]);
    // The next step's prompt: input parsed (and, after schema validation, in another key order), provider metadata carried.
    const next: LanguageModelV3Prompt[number] = {
      role: "assistant",
      content: [
        { type: "reasoning", text: "hmm", providerOptions: opts },
        { type: "text", text: "Reading." },
        { type: "tool-call", toolCallId: "c1", toolName: "read", input: { a: { b: 3, y: 2 }, z: 1 } },
      ],
    };
    const key = (m: LanguageModelV3Prompt[number], at: number) => toContextd(m).map((cm, j) => messageKey(at, j, cm));
    expect(key(answer, 4)).toEqual(key(next, 4));
    const hi: LanguageModelV3Prompt[number] = { role: "user", content: [{ type: "text", text: "yes" }] };
    expect(key(hi, 1)).not.toEqual(key(hi, 3));
  });
});
