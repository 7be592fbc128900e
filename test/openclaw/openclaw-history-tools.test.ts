/**
 * The plugin's agent tools in the real OpenClaw (the published package, pinned, under Node 24):
 * `contextd_search` and `contextd_expand` — contextd's history tools (`contextd/tools`, the MCP
 * server's too) — registered through OpenClaw's plugin loader and offered to the model with every
 * request of a turn. The model stand-in calls them as a provider would (chat-completions
 * `tool_calls`); what the test reads is what OpenClaw then sends the model: the tool result
 * message, and the answer built from it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { searchTool } from "../../src/sdk/history-tools.js";
import type { ContextdClient } from "../../src/sdk/runtime-client.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { contentText, type ModelServer, type RecordedRequest } from "./helpers/model-server.js";
import type { OpenClawHome, TurnResult } from "./helpers/openclaw-home.js";
import { startOpenClawStack, stopOpenClawStack } from "./helpers/openclaw-stack.js";

/** Planted in the first turn, then compacted away: only a search of the history finds it again. */
const FACT = "ZEPHYR-9315 is rounded in ledger_carry.ts";
/** The same ticket in another session of the same agent: found only with `all_sessions`. */
const OTHER_FACT = "ZEPHYR-9315 also shows up in payroll_sync.ts";
/** How a search hit's snippet shows a fact found by its ticket: the match marked «like this». */
const marked = (fact: string) => fact.replace("ZEPHYR-9315", "«ZEPHYR-9315»");
const FILLER = "word ".repeat(200);
/** What OpenClaw appends to a turn's user message, after the tool results of its tool loop. */
const INTERNAL_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

describe("OpenClaw's agent looks up what compaction folded away, through the plugin's contextd tools", () => {
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;
  let sessionId = "";

  beforeAll(async () => {
    // A short verbatim tail, so that a compaction folds the first turns into its summary.
    ({ model, contextd, cx, home } = await startOpenClawStack({ compaction: { keep_recent_tokens: 200 } }));
  }, 900_000);
  afterAll(() => stopOpenClawStack({ cx, contextd, model, home }));

  const ok = (t: TurnResult) => {
    expect(t.code, `${t.stdout}\n${t.stderr}`).toBe(0);
    return t;
  };
  /** The model requests of one turn, in order. */
  const turn = async (sessionKey: string, message: string) => {
    const n = model.requests().length;
    const result = await home.turn(sessionKey, message);
    return { result, sent: model.requests().slice(n) };
  };
  const toolNames = (r: RecordedRequest) => ((r.body.tools ?? []) as { function?: { name?: string } }[]).map((t) => t.function?.name);
  /** The tool results of the request's turn: those after its prompt (OpenClaw's own context block follows them). */
  const toolResults = (r: RecordedRequest) => {
    const messages = r.body.messages ?? [];
    let prompt = messages.length - 1;
    while (prompt >= 0 && !(messages[prompt].role === "user" && !contentText(messages[prompt].content).includes(INTERNAL_CONTEXT))) prompt--;
    return messages
      .slice(prompt + 1)
      .filter((m) => m.role === "tool")
      .map((m) => contentText(m.content));
  };

  it("a fact of the first turn is compacted away in contextd", async () => {
    // Inside a long message, where the extractive summary keeps its identifiers but not the sentence.
    const first = ok(await home.turn("billing", `Turn 1 SAY:reply-1 ${FILLER} Please remember: ${FACT}. ${FILLER}`));
    sessionId = first.json?.meta?.agentMeta?.sessionId ?? "";
    expect(sessionId).not.toBe("");
    ok(await home.turn("billing", `Turn 2 SAY:reply-2 ${FILLER}`));
    ok(await home.turn("billing", "Turn 3 SAY:reply-3"));
    // What OpenClaw's /compact and overflow recovery call: contextd's Compact.
    const compacted = await cx.compact({ session: { sessionId }, tokenBudget: 32_000, force: true });
    expect(compacted).toMatchObject({ ok: true, compacted: true });
    // The same ticket in another session of the same agent (OpenClaw's agent `main`).
    await cx.appendMessages({ session: { sessionId: "billing-elsewhere", agentId: "main" }, messages: [textMessage(Role.ROLE_USER, `${OTHER_FACT}.`)] });
    // Three OpenClaw turns under Node 24: ~40 s each on 2 busy cores.
  }, 300_000);

  it("the model calls contextd_search; the tool result OpenClaw sends it holds the planted fact, and the answer uses it", async () => {
    const { result, sent } = await turn("billing", 'Where is ZEPHYR-9315 rounded? CALL:contextd_search:{"query":"ZEPHYR-9315"} ECHO_TOOL_RESULT');
    ok(result);
    expect(sent.map((r) => r.answer)).toEqual(["tool_call", "reply"]);
    // The model is sent contextd's compacted context, which no longer holds the fact.
    expect(model.textOf(sent[0])).toContain("compacted into the following summary");
    expect(model.textOf(sent[0])).not.toContain(FACT);
    // Offered with every request, described as contextd's history tools describe themselves.
    expect(toolNames(sent[0])).toEqual(expect.arrayContaining(["contextd_search", "contextd_expand"]));
    const offered = ((sent[0].body.tools ?? []) as { function: { name: string; description: string; parameters: { properties: object } } }[]).find(
      (t) => t.function.name === "contextd_search",
    )!;
    expect(offered.function.description).toContain(searchTool.description);
    expect(Object.keys(offered.function.parameters.properties)).toContain("query");
    // The current session only (no session_id given: the tool is bound to the turn's session).
    const [found] = toolResults(sent[1]);
    expect(found).toContain(marked(FACT));
    expect(found).toContain(`session ${sessionId}`);
    expect(found).not.toContain("payroll_sync");
    expect(result.text).toContain(marked(FACT));
  }, 180_000);

  it("contextd_expand of the compaction summary gives back the turns it stands for, word for word", async () => {
    let compactionId = "";
    for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "compaction") compactionId = e.id;
    expect(compactionId).not.toBe("");
    const { result, sent } = await turn("billing", `CALL:contextd_expand:{"entry_id":"${compactionId}"} ECHO_TOOL_RESULT`);
    ok(result);
    const [expanded] = toolResults(sent.at(-1)!);
    expect(expanded).toContain(`Turn 1 SAY:reply-1 ${FILLER} Please remember: ${FACT}.`);
    expect(result.text).toContain(FACT);
  }, 180_000);

  it("with all_sessions the search covers every session of the agent", async () => {
    const { result, sent } = await turn("billing", 'CALL:contextd_search:{"query":"ZEPHYR-9315","all_sessions":true} ECHO_TOOL_RESULT');
    ok(result);
    const [found] = toolResults(sent.at(-1)!);
    expect(found).toContain(marked(FACT));
    expect(found).toContain(marked(OTHER_FACT));
    expect(found).toContain("session billing-elsewhere");
  }, 180_000);

  it("when contextd is unreachable the tool answers the model why, and the turn goes on", async () => {
    const dead = `127.0.0.1:${await getFreePort()}`;
    home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: dead } });
    try {
      const { result, sent } = await turn("offline", 'CALL:contextd_search:{"query":"ZEPHYR-9315"} SAY:after-error');
      expect(result.code, result.stderr).toBe(0);
      expect(result.text).toBe("after-error");
      expect(sent.map((r) => r.answer)).toEqual(["tool_call", "reply"]);
      // The tool threw the shared tool's error text; OpenClaw hands the model its error result.
      const [failed] = toolResults(sent[1]);
      expect(JSON.parse(failed)).toMatchObject({ status: "error", tool: "contextd_search", error: expect.stringContaining("contextd is unreachable") });
      expect(result.stderr).toMatch(/contextd_search failed: Error: contextd is unreachable/);
    } finally {
      home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
    }
  }, 180_000);

  it("historyTools: false leaves the tools out", async () => {
    home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address, historyTools: false } });
    try {
      const { result, sent } = await turn("billing", "Turn 9 SAY:reply-9");
      ok(result);
      expect(result.text).toBe("reply-9");
      expect(toolNames(sent[0]).length).toBeGreaterThan(0);
      expect(toolNames(sent[0])).not.toContain("contextd_search");
      expect(toolNames(sent[0])).not.toContain("contextd_expand");
      // Nor in Tool Search's directory of deferred tools, in the system prompt.
      const system = sent[0].body.messages?.[0];
      expect(system?.role).toBe("system");
      expect(contentText(system?.content)).not.toContain("contextd_search");
    } finally {
      home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
    }
  }, 180_000);
});
