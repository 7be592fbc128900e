/**
 * The real OpenClaw (2026.9.6, Node 24) on contextd through the plugin, on the paths where a turn
 * can reach contextd twice or in a copy made for the model: a compaction that kept no message
 * verbatim, overflow recovery in the middle of a tool loop (the provider answers
 * `context_length_exceeded`), and contextd going away during a tool-call turn. After each, OpenClaw's
 * stored transcript and contextd's are compared message by message, field by field — tool call ids
 * as OpenClaw stores them, tool results' `details` kept — with zero duplicates. The model is the one
 * stand-in (helpers/model-server.ts, tool calls included).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromContextdMessage } from "../../src/openclaw/agent-message.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import type { ModelServer } from "./helpers/model-server.js";
import type { OpenClawHome, TurnResult } from "./helpers/openclaw-home.js";
import { startOpenClawStack, stopOpenClawStack } from "./helpers/openclaw-stack.js";

const DEGRADED = /degraded to "legacy"/;
const KEY = "catch-up-1";

describe("OpenClaw's transcript and contextd's agree message for message, with no duplicates", () => {
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;
  let sessionId = "";

  beforeAll(async () => {
    ({ model, contextd, cx, home } = await startOpenClawStack({ compaction: { keep_recent_tokens: 200 } }));
  }, 900_000);
  afterAll(() => stopOpenClawStack({ cx, contextd, model, home }));

  const ok = (t: TurnResult) => {
    expect(t.stderr, t.stdout).not.toMatch(DEGRADED);
    expect(t.code, `${t.stdout}\n${t.stderr}`).toBe(0);
    return t;
  };

  /**
   * Every message OpenClaw stores for the session is in contextd exactly once, under its entry's
   * message key, equal field for field once mapped back; contextd holds no message OpenClaw does not
   * (summaries are compaction entries, not messages). Returns the stored messages.
   */
  const expectAgreement = async () => {
    const stored = (await home.storedMessages(KEY, sessionId)).filter((s) => s.message.role !== "compactionSummary" && s.message.role !== "branchSummary");
    const messages = [];
    for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "message") messages.push({ key: e.messageKey, message: e.entry.value });
    expect(messages.length, "contextd's messages against OpenClaw's").toBe(stored.length);
    for (const s of stored) {
      const held = messages.filter((m) => m.key === `openclaw:${s.entryId}`);
      expect(held, `OpenClaw entry ${s.entryId} (${s.message.role})`).toHaveLength(1);
      expect(fromContextdMessage(held[0].message)).toEqual(s.message);
    }
    expect(messages.map((m) => m.key)).toEqual(stored.map((s) => `openclaw:${s.entryId}`));
    return stored;
  };

  it("after a compaction that kept no message verbatim, the next turn is appended once and nothing before it again", async () => {
    const first = ok(await home.turn(KEY, `Turn 1 SAY:reply-1 ${"word ".repeat(200)}`));
    sessionId = first.json?.meta?.agentMeta?.sessionId ?? "";
    expect(sessionId).not.toBe("");
    ok(await home.turn(KEY, "Turn 2 TOOLS:1:two SAY:reply-2"));
    await expectAgreement();
    // As `contextctl compact <id> --budget 90 --force` does: a budget that leaves room for a short
    // summary and no message (45 tokens of prompt budget; the summary message alone takes 35).
    const compacted = await cx.compact({ session: { sessionId }, tokenBudget: 90, force: true });
    expect(compacted).toMatchObject({ ok: true, compacted: true, result: { firstKeptEntryId: "" } });
    const view = await cx.assemble({ session: { sessionId }, tokenBudget: 100_000, autoCompact: false });
    expect(view.messages).toHaveLength(1); // the summary
    const third = ok(await home.turn(KEY, "Turn 3 SAY:reply-3"));
    expect(third.stderr).not.toMatch(/caught up/);
    const stored = await expectAgreement();
    expect(stored.map((s) => s.message.role)).toEqual(["user", "assistant", "user", "assistant", "toolResult", "assistant", "user", "assistant"]);
  });

  it("overflow recovery in a tool loop: the turn is stored once, tool call ids as OpenClaw stores them, details kept", async () => {
    // Enough history that the overflow compaction has something to fold (keep_recent_tokens 200):
    // three tool results of ~500 tokens, which a summary keeps little of.
    ok(await home.turn(KEY, "Turn 3b TOOLS:3:big SAY:reply-3b"));
    const n = model.requests().length;
    const turn = ok(await home.turn(KEY, "Turn 4 TOOLS:2:ov OVERFLOW_AFTER_TOOLS:ov SAY:reply-4"));
    expect(turn.text).toBe("reply-4");
    const answers = model
      .requests()
      .slice(n)
      .map((r) => r.answer);
    expect(answers).toContain("overflow");
    expect(answers.at(-1)).toBe("reply");
    // The retry asks the model to continue "from the existing transcript": the compacted context it
    // is sent holds the turn so far — the user's request and the tool calls already made.
    const retried = model.requests().at(-1)!;
    expect(model.textOf(retried)).toContain("Turn 4 TOOLS:2:ov");
    const stored = await expectAgreement();
    // What the provider was sent is rewritten (OpenClaw strips the underscores of tool call ids);
    // what contextd stores is OpenClaw's own: call_ov_1, with the read tool's details.
    const sent = JSON.stringify(
      model
        .requests()
        .slice(n)
        .map((r) => r.body.messages),
    );
    expect(sent).toContain("callov1");
    expect(sent).not.toContain("call_ov_1");
    const results = stored.filter((s) => s.message.role === "toolResult" && String(s.message.toolCallId).startsWith("call_ov_"));
    expect(results.length).toBeGreaterThanOrEqual(2);
    for (const r of results) expect(r.message.details).toBeDefined();
  });

  it("contextd away during a tool-call turn and the next: when it is back, every turn is there once, in OpenClaw's order", async () => {
    const address = contextd.address;
    await contextd.stop();
    const down1 = await home.turn(KEY, "Turn 5 TOOLS:1:out SAY:reply-5");
    expect(down1).toMatchObject({ code: 0, text: "reply-5" });
    const down2 = await home.turn(KEY, "Turn 6 SAY:reply-6");
    expect(down2).toMatchObject({ code: 0, text: "reply-6" });
    contextd = await contextd.restart({ config: { listen: address } });
    cx.close();
    cx = new ContextdClient({ address: contextd.address });
    const back = ok(await home.turn(KEY, "Turn 7 SAY:reply-7"));
    expect(back.stderr).toMatch(/contextd: caught up session .* with 2 message\(s\)/);
    const stored = await expectAgreement();
    expect(stored.filter((s) => s.message.role === "toolResult" && s.message.toolCallId === "call_out_1")).toHaveLength(1);
  });
});
