/**
 * Property: every OpenClaw AgentMessage survives contextd unchanged — mapped to a contextd Message,
 * encoded and decoded as protobuf (what the wire and the store do), and mapped back, it deep-equals
 * the original. Messages are generated from OpenClaw 2026.9.x's types (every role, every content
 * block, provider fields, usage with cost, signatures, details), with fields that its types do not
 * declare but real transcripts carry (`__openclaw`, `provenance`, ...), wrong-typed values, and
 * adversarial strings. FC_SEED replays a run.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Message, Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { messageText } from "../../../src/contract/messages.js";
import { fromContextdMessage, toContextdMessage } from "../../../src/openclaw/agent-message.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";
import { agentMessage, json } from "../../fixtures/openclaw-messages.js";

const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;
const runs = { numRuns: Number(process.env.FC_RUNS ?? 400), ...(seed === undefined ? {} : { seed }) };

/** The message as JSON carries it (what OpenClaw writes and reads): JSON has no -0. */
const asJson = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

/** Through contextd: to a Message, over protobuf (wire and store), and back. */
function roundTrip(original: Record<string, unknown>): unknown {
  const m = toContextdMessage(original);
  return fromContextdMessage(Message.decode(Message.encode(m).finish()));
}

const tokenizer = createTokenizer("o200k_base");

describe("OpenClaw AgentMessage ↔ contextd Message", () => {
  it("every generated message comes back deep-equal", () => {
    fc.assert(
      fc.property(agentMessage, (original) => {
        expect(roundTrip(original)).toEqual(asJson(original));
      }),
      runs,
    );
  });

  it("so does any JSON object with an OpenClaw role, however its fields are typed", () => {
    const role = fc.constantFrom("user", "assistant", "toolResult", "custom", "bashExecution", "branchSummary", "compactionSummary");
    const anything = fc
      .tuple(
        role,
        fc.dictionary(
          fc.constantFrom("content", "timestamp", "usage", "toolCallId", "isError", "details", "api", "customType", "summary", "contextd.absent", "x"),
          json,
        ),
      )
      .map(([r, fields]) => ({ ...fields, role: r }));
    fc.assert(
      fc.property(anything, (original) => {
        expect(roundTrip(original)).toEqual(asJson(original));
      }),
      runs,
    );
  });

  it("engines read the explicit fields, and the content is what the model reads", () => {
    fc.assert(
      fc.property(agentMessage, (original) => {
        const m = toContextdMessage(original);
        expect(Role[m.role]).toBeDefined();
        expect(tokenizer.countMessage(m)).toBeGreaterThan(0);
        if (original.role === "assistant") {
          expect(m).toMatchObject({ api: original.api, provider: original.provider, model: original.model, stopReason: original.stopReason });
          const u = original.usage as Record<string, number> & { cost: Record<string, number> };
          expect(m.usage).toMatchObject({ input: u.input, output: u.output, total: u.totalTokens, cost: { total: u.cost.total } });
        }
        if (original.role === "toolResult") expect(m).toMatchObject({ toolCallId: original.toolCallId, isError: original.isError });
        if (original.role === "bashExecution") expect(messageText(m)).toContain(`Ran \`${String(original.command)}\``);
        if (original.role === "branchSummary" || original.role === "compactionSummary")
          expect(messageText(m)).toContain(`<summary>\n${String(original.summary)}`);
      }),
      runs,
    );
  });

  it("keeps each signature in an explicit field, byte for byte", () => {
    const m = toContextdMessage({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: "EqQBCkgIARABGAIiQL…", redacted: true },
        { type: "text", text: "Done.", textSignature: '{"v":1,"id":"msg_1","phase":"final_answer"}' },
        { type: "toolCall", id: "call_1|fc_1", name: "read", arguments: { path: "a.ts" }, thoughtSignature: "CiQB0e2Kb…" },
      ],
      api: "openai-responses",
      provider: "openai",
      model: "gpt-5",
      usage: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0, totalTokens: 3, cost: { input: 0.1, output: 0.2, cacheRead: 0, cacheWrite: 0, total: 0.3 } },
      stopReason: "toolUse",
      responseId: "resp_1",
      timestamp: 1_700_000_000_000,
    });
    const [thinking, textBlock, call] = m.content.map((b) => b.block!);
    expect(thinking).toMatchObject({ $case: "thinking", value: { signature: "EqQBCkgIARABGAIiQL…", redacted: true } });
    expect(textBlock).toMatchObject({ $case: "text", value: { signature: '{"v":1,"id":"msg_1","phase":"final_answer"}' } });
    expect(call).toMatchObject({ $case: "toolCall", value: { id: "call_1|fc_1", argumentsJson: '{"path":"a.ts"}', signature: "CiQB0e2Kb…" } });
    expect(m).toMatchObject({ responseId: "resp_1", usage: { cost: { total: 0.3 } } });
    // Nothing of this canonical message needed the opaque extra.
    expect([m.extraJson, ...m.content.map((b) => b.block!.value.extraJson)]).toEqual(["", "", "", ""]);
  });

  it("keeps a field that String() cannot render, rendering its JSON text for the model", () => {
    // A JSON object whose toString is a plain value makes String() throw (found by the property above).
    const cases: [Record<string, unknown>, string][] = [
      [{ role: "branchSummary", summary: { toString: false } }, '<summary>\n{"toString":false}</summary>'],
      [{ role: "compactionSummary", summary: { valueOf: 1, toString: null }, tokensBefore: 3 }, '<summary>\n{"valueOf":1,"toString":null}\n</summary>'],
      [{ role: "bashExecution", command: { toString: "x" }, output: { toString: [] }, exitCode: 1 }, 'Ran `{"toString":"x"}`\n```\n{"toString":[]}\n```'],
    ];
    for (const [original, rendered] of cases) {
      expect(messageText(toContextdMessage(original))).toContain(rendered);
      expect(roundTrip(original)).toEqual(asJson(original));
    }
  });

  it("gives back a message the proto fields describe whole as it was, not completed as one from an engine", () => {
    // Found by the property above: without an extra the way back added `display: true`.
    const original = { role: "custom", customType: "", content: [] };
    expect(toContextdMessage(original).extraJson).not.toBe("");
    expect(roundTrip(original)).toEqual(original);
    // A message an engine built (no extra) is still completed with what OpenClaw requires.
    const built = Message.fromPartial({ role: Role.ROLE_CUSTOM, customType: "note", content: [] });
    expect(fromContextdMessage(built)).toEqual({ role: "custom", customType: "note", content: [], display: true });
  });

  it("refuses what has no OpenClaw role, naming the field", () => {
    expect(() => toContextdMessage({ role: "robot", content: "x" }, "messages[2]")).toThrow(/messages\[2\]\.role "robot" is not an OpenClaw message role/);
    expect(() => toContextdMessage("hello", "message")).toThrow(/message must be a JSON object/);
  });
});
