/**
 * The plugin's decisions that need no process (integrations/openclaw/src/catch-up.ts, budget.ts,
 * engine.ts userPrompt): which stored messages contextd lacks, the message keys of a committed
 * turn, the budget each assemble asks for, and the user's text in a retried turn's prompt. The same
 * paths driven by the real OpenClaw: openclaw-catch-up.test.ts.
 */
import { describe, expect, it } from "vitest";
import { Budgets } from "../../../../integrations/openclaw/src/budget.js";
import { missingFromContextd, turnMessageKeys } from "../../../../integrations/openclaw/src/catch-up.js";
import { userPrompt } from "../../../../integrations/openclaw/src/engine.js";
import type { AgentMessage } from "../../../../integrations/openclaw/src/openclaw-api.js";
import type { StoredMessage } from "../../../../integrations/openclaw/src/openclaw-runtime.js";

const msg = (role: string, text: string, timestamp: number): AgentMessage => ({ role, content: text, timestamp }) as AgentMessage;
const stored = (n: number, from = 0): StoredMessage[] =>
  Array.from({ length: n }, (_, i) => ({ entryId: `e${from + i}`, message: msg(i % 2 ? "assistant" : "user", `m${from + i}`, 1000 + from + i) }));

describe("catch-up: what contextd lacks is decided by message key, never by position", () => {
  const history = stored(6);

  it("everything after the newest message contextd holds by key", () => {
    expect(missingFromContextd(history, { lastMessageKey: "openclaw:e3", lastMessageTimestampMs: 9_999_999 }).map((s) => s.entryId)).toEqual(["e4", "e5"]);
    expect(missingFromContextd(history, { lastMessageKey: "openclaw:e5", lastMessageTimestampMs: 0 })).toEqual([]);
  });

  it("after a compaction that kept nothing, contextd's newest key still marks where it is: nothing is appended again", () => {
    // (The view then holds only a summary; the old rule compared with the view and appended all.)
    expect(missingFromContextd(history, { lastMessageKey: "openclaw:e5", lastMessageTimestampMs: 1005 })).toEqual([]);
  });

  it("a session whose messages carry no key (appended before the plugin keyed them): what is newer than contextd's newest message", () => {
    expect(missingFromContextd(history, { lastMessageKey: "", lastMessageTimestampMs: 1003 }).map((s) => s.entryId)).toEqual(["e4", "e5"]);
    expect(missingFromContextd(history, { lastMessageKey: "", lastMessageTimestampMs: 0 })).toHaveLength(6);
  });

  it("a key another writer gave, or one not on OpenClaw's branch, falls back to the timestamps", () => {
    expect(missingFromContextd(history, { lastMessageKey: "mine:7", lastMessageTimestampMs: 1004 }).map((s) => s.entryId)).toEqual(["e5"]);
    expect(missingFromContextd(history, { lastMessageKey: "openclaw:gone", lastMessageTimestampMs: 1004 }).map((s) => s.entryId)).toEqual(["e5"]);
  });

  it("summaries OpenClaw derives itself are never appended", () => {
    const withSummary = [...history, { entryId: "s1", message: msg("compactionSummary", "summary", 2000) }];
    expect(missingFromContextd(withSummary, { lastMessageKey: "openclaw:e5", lastMessageTimestampMs: 0 })).toEqual([]);
  });
});

describe("commitTurn: the turn's messages get their entries' keys", () => {
  const history = stored(8);
  const turn = history.slice(4, 7).map((s) => structuredClone(s.message));

  it("from OpenClaw's anchors: message i is the stored message at admission + i", () => {
    const keys = turnMessageKeys(turn, history, { entryId: "e4", activeMessagePosition: 4 }, { entryId: "e6", activeMessagePosition: 6 });
    expect(keys).toEqual(["openclaw:e4", "openclaw:e5", "openclaw:e6"]);
  });

  it("when the anchors do not check out, by content", () => {
    expect(turnMessageKeys(turn, history, { entryId: "e3", activeMessagePosition: 3 }, { entryId: "e6" })).toEqual([
      "openclaw:e4",
      "openclaw:e5",
      "openclaw:e6",
    ]);
    expect(turnMessageKeys(turn, history)).toEqual(["openclaw:e4", "openclaw:e5", "openclaw:e6"]);
  });

  it("a message that is not in the stored transcript gets no key", () => {
    expect(turnMessageKeys([msg("user", "not stored", 5)], history)).toEqual([""]);
  });
});

describe("budgets", () => {
  const budgets = () => new Budgets({ defaultTokenBudget: 128_000, toolSchemaTokens: 250 });

  it("a turn's first assemble gets OpenClaw's budget as it is (window less reserve and system prompt)", () => {
    expect(budgets().forAssemble("s", { tokenBudget: 17_893 }, true)).toBe(17_893);
  });

  it("before each model request: the turn-start budget less the pending messages, less the tool schemas", () => {
    const b = budgets();
    b.forAssemble("s", { tokenBudget: 17_893 }, true);
    const tools = new Set(["read", "write", "exec"]);
    // window 32,000, budget 31,964: 36 tokens of pending messages.
    expect(
      b.forAssemble(
        "s",
        { tokenBudget: 31_964, availableTools: tools, runtimeSettings: { limits: { promptTokenBudget: 32_000, maxOutputTokens: null } } },
        false,
      ),
    ).toBe(17_893 - 36 - 3 * 250);
  });

  it("without a turn start seen, the loop's budget less the tools; none given, the default", () => {
    expect(budgets().forAssemble("s", { tokenBudget: 31_964, availableTools: new Set(["a"]) }, false)).toBe(31_714);
    expect(budgets().forAssemble("s", {}, false)).toBe(128_000);
  });
});

describe("the user's text in OpenClaw's prompt", () => {
  it("a retried turn's continuation gives back the queued user message; a bare 'continue' is no prompt", () => {
    const queued =
      "[Queued user message from a previous active turn; preserved as context only. Continue with the active prompt below.]\n" +
      "Fix the rounding in src/billing.ts\n\nContinue the current task from the existing transcript, preserving completed work.";
    expect(userPrompt(queued)).toBe("Fix the rounding in src/billing.ts");
    expect(userPrompt("Continue the current task from the existing transcript, preserving completed work.")).toBeUndefined();
    expect(userPrompt("Fix it")).toBe("Fix it");
    expect(userPrompt(undefined)).toBeUndefined();
  });
});
