import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { textBlock, textMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import {
  INTRA_TURN_CUT,
  NOT_A_CUT,
  TURN_CUT,
  analyzeCutPoints,
  chooseCut,
  suffixSums,
} from "../../../src/legacy/compaction/cut-points.js";

const user = (text = "u"): Message => textMessage(Role.ROLE_USER, text);
const system = (text = "s"): Message => textMessage(Role.ROLE_SYSTEM, text);
const assistant = (...calls: string[]): Message =>
  textMessage(Role.ROLE_ASSISTANT, "a", {
    content: [
      textBlock("a"),
      ...calls.map((id) => toolCallBlock(id, "read", "{}")),
    ],
  });
const result = (callId: string): Message =>
  textMessage(Role.ROLE_TOOL_RESULT, "r", { toolCallId: callId, toolName: "read" });

describe("analyzeCutPoints", () => {
  it("marks turn boundaries and intra-turn cuts", () => {
    const kinds = analyzeCutPoints([user(), assistant(), user(), assistant(), assistant()]);
    expect([...kinds]).toEqual([TURN_CUT, INTRA_TURN_CUT, TURN_CUT, INTRA_TURN_CUT, INTRA_TURN_CUT]);
  });

  it("never cuts at a tool result or between a tool call and its result", () => {
    // 0 user, 1 assistant(c1, c2), 2 result c1, 3 result c2, 4 assistant, 5 user
    const kinds = analyzeCutPoints([user(), assistant("c1", "c2"), result("c1"), result("c2"), assistant(), user()]);
    expect([...kinds]).toEqual([TURN_CUT, INTRA_TURN_CUT, NOT_A_CUT, NOT_A_CUT, INTRA_TURN_CUT, TURN_CUT]);
  });

  it("blocks every cut between a call and a late result, even at a user message", () => {
    // the result of c1 arrives after an interjected user message (e.g. a steering message)
    const kinds = analyzeCutPoints([user(), assistant("c1"), user("steer"), system(), result("c1"), user()]);
    expect([...kinds]).toEqual([TURN_CUT, INTRA_TURN_CUT, NOT_A_CUT, NOT_A_CUT, NOT_A_CUT, TURN_CUT]);
  });

  it("attaches a tool result whose call is missing to the nearest preceding assistant", () => {
    const kinds = analyzeCutPoints([user(), assistant(), user("between"), result("missing"), user()]);
    expect([...kinds]).toEqual([TURN_CUT, INTRA_TURN_CUT, NOT_A_CUT, NOT_A_CUT, TURN_CUT]);
  });

  it("does not cut at a leading orphan result, but after it", () => {
    const kinds = analyzeCutPoints([result("gone"), assistant(), user()]);
    expect([...kinds]).toEqual([NOT_A_CUT, INTRA_TURN_CUT, TURN_CUT]);
  });

  it("agrees with a brute-force definition on random transcripts", () => {
    const arbMessage = fc.oneof(
      fc.constant<["user"]>(["user"]),
      fc.constant<["system"]>(["system"]),
      fc.tuple(fc.constant("assistant" as const), fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 })),
      fc.tuple(fc.constant("result" as const), fc.integer({ min: 0, max: 7 })),
    );
    fc.assert(
      fc.property(fc.array(arbMessage, { maxLength: 30 }), (spec) => {
        const messages = spec.map((s) => {
          switch (s[0]) {
            case "user":
              return user();
            case "system":
              return system();
            case "assistant":
              return assistant(...s[1].map((c) => `c${c}`));
            case "result":
              return result(`c${s[1]}`);
          }
        });
        const kinds = analyzeCutPoints(messages);
        // owners per the definition: latest earlier message making the call, else nearest earlier assistant
        const owners = messages.map((m, j) => {
          if (m.role !== Role.ROLE_TOOL_RESULT) return -1;
          for (let k = j - 1; k >= 0; k--) {
            const calls = messages[k].content.flatMap((b) => (b.block?.$case === "toolCall" ? [b.block.value.id] : []));
            if (calls.includes(m.toolCallId)) return k;
          }
          for (let k = j - 1; k >= 0; k--) if (messages[k].role === Role.ROLE_ASSISTANT) return k;
          return -1;
        });
        for (let i = 0; i < messages.length; i++) {
          const straddled = owners.some((o, j) => o >= 0 && o < i && j >= i);
          const valid = messages[i].role !== Role.ROLE_TOOL_RESULT && !straddled;
          const expected = !valid ? NOT_A_CUT : messages[i].role === Role.ROLE_USER ? TURN_CUT : INTRA_TURN_CUT;
          expect(kinds[i]).toBe(expected);
        }
      }),
    );
  });
});

describe("chooseCut", () => {
  // tokens:             u:10 a:10 u:10 a:50 r:50 a:10
  const messages = [user(), assistant(), user(), assistant("c"), result("c"), assistant()];
  const tokens = [10, 10, 10, 50, 50, 10];
  const kinds = analyzeCutPoints(messages);
  const suffix = suffixSums(tokens);

  it("computes suffix sums", () => {
    expect([...suffix]).toEqual([140, 130, 120, 110, 60, 10, 0]);
  });

  it("prefers the earliest turn boundary whose tail fits", () => {
    expect(chooseCut(kinds, suffix, 1000)).toEqual({ index: 2, kind: "turn" }); // index 0 is never used by default
    expect(chooseCut(kinds, suffix, 120)).toEqual({ index: 2, kind: "turn" });
  });

  it("falls back to an intra-turn cut only when no turn boundary fits", () => {
    expect(chooseCut(kinds, suffix, 119)).toEqual({ index: 3, kind: "intra_turn" });
    // 60 would fit at the tool result (index 4), which is not a cut point
    expect(chooseCut(kinds, suffix, 60)).toEqual({ index: 5, kind: "intra_turn" });
  });

  it("keeps nothing when no cut fits", () => {
    expect(chooseCut(kinds, suffix, 9)).toEqual({ index: 6, kind: "none" });
    expect(chooseCut(kinds, suffix, -5)).toEqual({ index: 6, kind: "none" });
  });

  it("respects the starting index", () => {
    expect(chooseCut(kinds, suffix, 1000, 0)).toEqual({ index: 0, kind: "turn" });
    expect(chooseCut(kinds, suffix, 1000, 3)).toEqual({ index: 3, kind: "intra_turn" });
  });
});
