import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConversation, readConversationFile, splitTurns } from "../../../src/cli/conversation-file.js";
import { Message, Role, type ContentBlock } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText, thinkingBlock, toolCallBlock, toolCallIds } from "../../../src/contract/messages.js";

const jsonl = (...lines: unknown[]) => lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n");

describe("parseConversation", () => {
  it("reads the simple chat form with tool calls and tool results", () => {
    const messages = parseConversation(
      jsonl(
        { role: "system", content: "You are helpful." },
        { role: "user", content: "Read a.ts" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", name: "read", arguments: { path: "a.ts" } }] },
        { role: "assistant", content: "", tool_calls: [{ id: "c2", type: "function", function: { name: "ls", arguments: '{"dir":"."}' } }] },
        { role: "tool", tool_call_id: "c1", name: "read", content: "export const a = 1;" },
        { role: "tool_result", tool_call_id: "c2", content: [{ type: "text", text: "a.ts" }] },
        { role: "assistant", content: [{ type: "text", text: "Done." }] },
      ),
    );
    expect(messages.map((m) => m.role)).toEqual([
      Role.ROLE_SYSTEM,
      Role.ROLE_USER,
      Role.ROLE_ASSISTANT,
      Role.ROLE_ASSISTANT,
      Role.ROLE_TOOL_RESULT,
      Role.ROLE_TOOL_RESULT,
      Role.ROLE_ASSISTANT,
    ]);
    expect(messageText(messages[1])).toBe("Read a.ts");
    expect(toolCallIds(messages[2])).toEqual(["c1"]);
    expect(messages[2].content[0]).toEqual(toolCallBlock("c1", "read", '{"path":"a.ts"}'));
    expect(messages[3].content.at(-1)).toEqual(toolCallBlock("c2", "ls", '{"dir":"."}'));
    expect(messages[4]).toMatchObject({ toolCallId: "c1", toolName: "read" });
    expect(messages[5]).toMatchObject({ toolCallId: "c2" });
    expect(messageText(messages[6])).toBe("Done.");
  });

  it("reads OpenClaw session lines and skips the other entry types", () => {
    const messages = parseConversation(
      jsonl(
        { type: "session", version: 3, id: "s1", timestamp: "2025-01-01T00:00:00Z", cwd: "/w" },
        { type: "message", id: "e1", message: { role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1000 } },
        {
          type: "message",
          id: "e2",
          message: {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hmm", thinkingSignature: "sig" },
              { type: "toolCall", id: "t1", name: "bash", arguments: { cmd: "ls" } },
            ],
            usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 },
          },
        },
        {
          type: "message",
          id: "e3",
          message: { role: "toolResult", toolCallId: "t1", toolName: "bash", isError: true, content: [{ type: "text", text: "boom" }] },
        },
        { type: "compaction", summary: "old", firstKeptEntryId: "e2", tokensBefore: 100 },
        { type: "custom", customType: "x", data: {} },
      ),
    );
    expect(messages).toHaveLength(3);
    expect(messages[0]).toMatchObject({ role: Role.ROLE_USER, timestampMs: 1000 });
    expect(messages[1].content[0]).toEqual(thinkingBlock("hmm", "sig"));
    expect(messages[1].content[1]).toEqual(toolCallBlock("t1", "bash", '{"cmd":"ls"}'));
    expect(messages[1].usage).toEqual({ input: 10, output: 5, cacheRead: 0, cacheWrite: 0, total: 15 });
    expect(messages[2]).toMatchObject({ role: Role.ROLE_TOOL_RESULT, toolCallId: "t1", toolName: "bash", isError: true });
  });

  it("reads the proto JSON form", () => {
    const original = Message.fromPartial({
      role: Role.ROLE_ASSISTANT,
      content: [
        { block: { $case: "text", value: { text: "ok" } } },
        { block: { $case: "toolCall", value: { id: "k", name: "f", argumentsJson: "{}" } } },
      ] as ContentBlock[],
      metadata: { a: "b" },
    });
    const [parsed, second] = parseConversation(jsonl(Message.toJSON(original), { role: "ROLE_USER", content: [{ text: { text: "hi" } }] }));
    expect(parsed).toEqual(original);
    expect(second.role).toBe(Role.ROLE_USER);
    expect(messageText(second)).toBe("hi");
  });

  it("skips blank lines and accepts mixed forms", () => {
    const messages = parseConversation(
      `\n${jsonl({ role: "user", content: "a" })}\n\n   \n${jsonl({ type: "message", message: { role: "assistant", content: [{ type: "text", text: "b" }] } })}\n`,
    );
    expect(messages.map(messageText)).toEqual(["a", "b"]);
  });

  it("names the line of a bad line", () => {
    const good = jsonl({ role: "user", content: "a" });
    expect(() => parseConversation(`${good}\n\n{not json`, "conv.jsonl")).toThrow(/^conv\.jsonl:3: invalid JSON/);
    expect(() => parseConversation(`${good}\n${jsonl({ role: "robot", content: "x" })}`)).toThrow(/:2: unknown role "robot"/);
    expect(() => parseConversation(jsonl({ role: "tool", content: "x" }))).toThrow(/:1: a tool result needs a tool call id/);
    expect(() => parseConversation(jsonl({ role: "ROLE_NOPE" }))).toThrow(/:1: the message has no valid role/);
    expect(() => parseConversation(jsonl({ type: "message", message: { role: "bogus" } }))).toThrow(
      /:1: message\.role "bogus" is not an OpenClaw message role/,
    );
    expect(() => parseConversation("[1,2]")).toThrow(/:1: a line must be a JSON object/);
    expect(() => parseConversation(jsonl({ role: "assistant", tool_calls: [{ name: "f" }] }))).toThrow(/:1: a tool call needs an id/);
  });

  it("reads a file and names it in errors", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conv-"));
    const file = join(dir, "c.jsonl");
    writeFileSync(file, `${jsonl({ role: "user", content: "a" })}\nnope\n`);
    await expect(readConversationFile(file)).rejects.toThrow(`${file}:2: invalid JSON`);
  });
});

describe("splitTurns", () => {
  const parse = (roles: string[]) =>
    parseConversation(jsonl(...roles.map((role, i) => (role === "tool" ? { role, tool_call_id: `c${i}`, content: "r" } : { role, content: `${role} ${i}` }))));

  it("starts a turn at each user message", () => {
    const turns = splitTurns(parse(["user", "assistant", "tool", "assistant", "user", "assistant", "user"]));
    expect(turns.map((t) => t.length)).toEqual([4, 2, 1]);
    expect(turns.every((t) => t[0].role === Role.ROLE_USER)).toBe(true);
  });

  it("keeps messages before the first user message in the first turn", () => {
    const turns = splitTurns(parse(["system", "user", "assistant", "user"]));
    expect(turns.map((t) => t.map((m) => m.role))).toEqual([[Role.ROLE_SYSTEM, Role.ROLE_USER, Role.ROLE_ASSISTANT], [Role.ROLE_USER]]);
  });

  it("returns no turns for no messages", () => {
    expect(splitTurns([])).toEqual([]);
  });
});
