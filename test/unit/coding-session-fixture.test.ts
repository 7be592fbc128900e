import { describe, expect, it } from "vitest";
import { Message, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import { codingSession, moreTurns, PLANTED_FACTS, TOOL_NAMES, type PlantedFacts } from "../fixtures/coding-session.js";
import { callIdsOf, textOf, toolCallsOf } from "../fixtures/messages.js";

const tokenizer = createTokenizer("o200k_base");
const session = codingSession({ turns: 40, seed: 1 });
const factKeys = Object.keys(PLANTED_FACTS) as Array<keyof PlantedFacts>;

/** Asserts the tool-call/result pairing of a run of messages; returns the number of calls. */
function checkToolPairing(messages: Message[]): number {
  let calls = 0;
  const seen = new Set<string>();
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === Role.ROLE_ASSISTANT) {
      const declared = toolCallsOf(m);
      // Every call of this message is answered by the very next messages, in order, before anything else.
      declared.forEach((call, j) => {
        const result = messages[i + 1 + j];
        expect(result, `result of ${call.id}`).toBeDefined();
        expect(result!.role).toBe(Role.ROLE_TOOL_RESULT);
        expect(result!.toolCallId).toBe(call.id);
        expect(result!.toolName).toBe(call.name);
        expect(TOOL_NAMES).toContain(call.name);
        expect(seen.has(call.id), `duplicate call id ${call.id}`).toBe(false);
        seen.add(call.id);
        calls++;
      });
    } else if (m.role === Role.ROLE_TOOL_RESULT) {
      // A result is preceded (through other results only) by the assistant message that made its call.
      let k = i - 1;
      while (k >= 0 && messages[k]!.role === Role.ROLE_TOOL_RESULT) k--;
      expect(k, `tool result at ${i} without a preceding call`).toBeGreaterThanOrEqual(0);
      expect(callIdsOf(messages[k]!)).toContain(m.toolCallId);
    }
  }
  return calls;
}

describe("codingSession fixture", () => {
  it("is long: at least 150 messages and 120k o200k tokens", () => {
    expect(session.messages.length).toBeGreaterThanOrEqual(150);
    const tokens = session.messages.reduce((sum, m) => sum + tokenizer.countMessage(m), 0);
    expect(tokens).toBeGreaterThanOrEqual(120_000);
  });

  it("has the shape of an agent session", () => {
    const { messages, turnStarts } = session;
    expect(turnStarts).toHaveLength(41);
    for (const start of turnStarts) expect(messages[start]!.role).toBe(Role.ROLE_USER);
    expect(messages.at(-1)!.role).toBe(Role.ROLE_USER);
    expect(turnStarts.at(-1)).toBe(messages.length - 1);
    // Each complete turn: user request, 1–4 tool calls, a wrap-up without tool calls.
    for (let t = 0; t < 40; t++) {
      const turn = messages.slice(turnStarts[t], turnStarts[t + 1]);
      const calls = turn.flatMap(toolCallsOf);
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(calls.length).toBeLessThanOrEqual(4);
      const last = turn.at(-1)!;
      expect(last.role).toBe(Role.ROLE_ASSISTANT);
      expect(toolCallsOf(last)).toHaveLength(0);
      expect(turn.filter((m) => m.role === Role.ROLE_USER)).toHaveLength(1);
    }
    for (let i = 1; i < messages.length; i++) expect(messages[i]!.timestampMs).toBeGreaterThan(messages[i - 1]!.timestampMs);
    for (const m of messages) {
      expect(m.id).toBe("");
      expect(m.content.length).toBeGreaterThan(0);
    }
  });

  it("answers every tool call right after it, and some calls fail", () => {
    const calls = checkToolPairing(session.messages);
    const results = session.messages.filter((m) => m.role === Role.ROLE_TOOL_RESULT);
    expect(results).toHaveLength(calls);
    const errors = results.filter((m) => m.isError).length;
    expect(errors).toBeGreaterThan(0);
    expect(errors).toBeLessThan(results.length / 2);
    expect(new Set(results.map((m) => m.toolName))).toEqual(new Set(TOOL_NAMES));
  });

  it("has large, varied tool results (1–6k tokens, not repeated words)", () => {
    const results = session.messages.filter((m) => m.role === Role.ROLE_TOOL_RESULT);
    const sizes = results.map((m) => tokenizer.countMessage(m));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(8_000);
    expect(sizes.filter((s) => s >= 1_000).length).toBeGreaterThanOrEqual(20);
    for (const m of results) {
      const lines = textOf(m)
        .split("\n")
        .filter((l) => l.trim());
      if (lines.length < 20) continue;
      expect(new Set(lines).size / lines.length).toBeGreaterThan(0.6);
      const words = textOf(m).split(/\W+/).filter(Boolean);
      expect(new Set(words).size).toBeGreaterThan(50);
    }
  });

  it("is deterministic, and the seed matters", () => {
    expect(codingSession({ turns: 40, seed: 1 })).toEqual(session);
    const other = codingSession({ turns: 40, seed: 2 });
    expect(other.messages.map(textOf)).not.toEqual(session.messages.map(textOf));
    expect(moreTurns(40, 5, 9)).toEqual(moreTurns(40, 5, 9));
  });

  it("round-trips through the protobuf wire format", () => {
    for (const m of session.messages.slice(0, 30)) expect(Message.decode(Message.encode(m).finish())).toEqual(m);
  });

  it("plants the facts in the first two turns, and only there", () => {
    expect(session.planted).toEqual(PLANTED_FACTS);
    const early = session.messages.slice(0, session.turnStarts[2]).map(textOf).join("\n");
    const firstTwoUserRequests = [session.messages[session.turnStarts[0]!]!, session.messages[session.turnStarts[1]!]!].map(textOf).join("\n");
    const later = session.messages.slice(session.turnStarts[2]).map(textOf).join("\n");
    const continuation = moreTurns(40, 30, 7).map(textOf).join("\n");
    for (const key of factKeys) {
      const fact = session.planted[key];
      expect(early, key).toContain(fact);
      expect(firstTwoUserRequests, key).toContain(fact);
      expect(later.includes(fact), `${key} leaks into later turns`).toBe(false);
      expect(continuation.includes(fact), `${key} leaks into moreTurns`).toBe(false);
    }
    // Tool results and arguments are searched too (textOf includes tool-call arguments).
    expect(session.messages.slice(0, session.turnStarts[2]).some((m) => m.role === Role.ROLE_TOOL_RESULT && m.isError)).toBe(true);
  });

  it("plants the facts even in a one-turn session (the pending request is turn 1's)", () => {
    const short = codingSession({ turns: 1, seed: 3 });
    const all = short.messages.map(textOf).join("\n");
    for (const key of factKeys) expect(all, key).toContain(short.planted[key]);
    expect(short.messages.at(-1)!.role).toBe(Role.ROLE_USER);
  });

  it("continues with moreTurns: answers the pending request, ends with a user message", () => {
    const more = moreTurns(session.nextTurn, 10, 2);
    expect(more[0]!.role).toBe(Role.ROLE_ASSISTANT);
    expect(more.at(-1)!.role).toBe(Role.ROLE_USER);
    expect(more.filter((m) => m.role === Role.ROLE_USER)).toHaveLength(10);
    const all = [...session.messages, ...more];
    checkToolPairing(all);
    for (let i = 1; i < all.length; i++) expect(all[i]!.timestampMs).toBeGreaterThan(all[i - 1]!.timestampMs);
    // The latest user message is unique in the whole conversation, so "present verbatim" is meaningful.
    const last = textOf(all.at(-1)!);
    expect(all.filter((m) => m.role === Role.ROLE_USER && textOf(m) === last)).toHaveLength(1);
    expect(session.messages.filter((m) => m.role === Role.ROLE_USER && textOf(m) === textOf(session.messages.at(-1)!))).toHaveLength(1);
  });

  it("with the same seed, a continuation equals a longer session", () => {
    const a = codingSession({ turns: 12, seed: 5 });
    const b = codingSession({ turns: 20, seed: 5 });
    expect([...a.messages, ...moreTurns(a.nextTurn, 8, 5)]).toEqual(b.messages);
  });
});
