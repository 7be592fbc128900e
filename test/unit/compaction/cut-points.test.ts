import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { textBlock, textMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { Role, type Message } from "../../../src/contract/gen/contextd/v1/types.js";
import { INTRA_TURN_CUT, NOT_A_CUT, TURN_CUT, analyzeCutPoints, chooseCut, chooseFillingCut, suffixSums } from "../../../src/compaction/cut-points.js";

const user = (text = "u"): Message => textMessage(Role.ROLE_USER, text);
const system = (text = "s"): Message => textMessage(Role.ROLE_SYSTEM, text);
const assistant = (...calls: string[]): Message =>
  textMessage(Role.ROLE_ASSISTANT, "a", {
    content: [textBlock("a"), ...calls.map((id) => toolCallBlock(id, "read", "{}"))],
  });
const result = (callId: string): Message => textMessage(Role.ROLE_TOOL_RESULT, "r", { toolCallId: callId, toolName: "read" });

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

describe("chooseFillingCut", () => {
  // An agent's session: an old turn, then a big turn of tool pairs, then the pending request.
  // tokens:             u:10 a:10 u:10 a:40 r:300 a:40 r:300 a:40 r:300 a:20 u:5
  const messages = [user(), assistant(), user(), assistant("x"), result("x"), assistant("y"), result("y"), assistant("z"), result("z"), assistant(), user()];
  const tokens = [10, 10, 10, 40, 300, 40, 300, 40, 300, 20, 5];
  const kinds = analyzeCutPoints(messages);
  const suffix = suffixSums(tokens);

  it("keeps the most that fits, at a tool-pair boundary inside a turn, where chooseCut keeps only the pending request", () => {
    expect(chooseCut(kinds, suffix, 800)).toEqual({ index: 10, kind: "turn" }); // 5 tokens kept
    expect(chooseFillingCut(kinds, suffix, 800)).toEqual({ index: 5, kind: "intra_turn" }); // 705 tokens kept
  });

  it("prefers a turn boundary that keeps nearly as much (within slack × keep budget)", () => {
    // everything from index 2 is 1055; the best fit of 1060 is index 2 itself, a turn boundary
    expect(chooseFillingCut(kinds, suffix, 1060)).toEqual({ index: 2, kind: "turn" });
    // 1070 fits from index 1 (1065), an intra-turn cut; the turn boundary at 2 keeps only 10 less
    expect(chooseFillingCut(kinds, suffix, 1070)).toEqual({ index: 2, kind: "turn" });
    // without slack the intra-turn cut wins
    expect(chooseFillingCut(kinds, suffix, 1070, 1, 0)).toEqual({ index: 1, kind: "intra_turn" });
  });

  it("never starts at a tool result and keeps nothing when no cut fits", () => {
    // 340 would fit from the tool result at index 8 (325), which is not a cut point: index 9 (25)
    expect(chooseFillingCut(kinds, suffix, 340, 1, 0)).toEqual({ index: 9, kind: "intra_turn" });
    expect(chooseFillingCut(kinds, suffix, 4)).toEqual({ index: 11, kind: "none" });
  });

  it("respects the starting index", () => {
    expect(chooseFillingCut(kinds, suffix, 10_000, 0)).toEqual({ index: 0, kind: "turn" });
    expect(chooseFillingCut(kinds, suffix, 1_000, 6)).toEqual({ index: 7, kind: "intra_turn" });
  });
});
