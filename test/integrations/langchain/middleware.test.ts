import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, modelRetryMiddleware, tool } from "langchain";
import { ContextdClient, Role, type Message } from "contextd/client";
import { contextdMiddleware, contextdTools, type ContextdMiddlewareOptions } from "@contextd/langchain";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { contentText, startModelServer, type ModelServer } from "../../openclaw/helpers/model-server.js";

/**
 * The LangChain integration driven through the published `langchain` (createAgent) and
 * `@langchain/openai` (ChatOpenAI), pinned in the root package.json, against a real contextd and the
 * chat-completions stand-in of the OpenClaw tests, on real sockets.
 */
let contextd: ContextdProcess;
let model: ModelServer;
let client: ContextdClient;

beforeAll(async () => {
  model = await startModelServer();
  // A small recent tail, so that a small budget makes contextd compact.
  contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 200 } } });
  client = new ContextdClient({ address: contextd.address });
});

afterAll(async () => {
  client?.close();
  await contextd?.stop();
  await model?.close();
});

/** ChatOpenAI pointed at the stand-in; `headers` go with every request (the stand-in's `x-tool-loop`). */
function chat(headers: Record<string, string> = {}, maxRetries?: number) {
  return new ChatOpenAI({ model: "fake-model", apiKey: "test-key", maxRetries, configuration: { baseURL: model.baseUrl, defaultHeaders: headers } });
}

/** The session's stored messages with their keys, oldest first. */
async function stored(sessionId: string): Promise<{ key: string; message: Message }[]> {
  const out: { key: string; message: Message }[] = [];
  for await (const e of client.transcript(sessionId)) if (e.entry?.$case === "message") out.push({ key: e.messageKey, message: e.entry.value });
  return out;
}

async function compactions(sessionId: string): Promise<number> {
  let n = 0;
  for await (const e of client.transcript(sessionId)) if (e.entry?.$case === "compaction") n++;
  return n;
}

const text = (m: Message) => m.content.map((c) => (c.block?.$case === "text" ? c.block.value.text : "")).join("");

/** The `read` tool the stand-in calls: a long answer, so that a tool loop outgrows a small budget. */
const read = tool(
  async ({ path }: { path: string }, config) => `${path} (${config.toolCall?.id}): ${"the quick brown fox jumps over the lazy dog ".repeat(8)}`,
  {
    name: "read",
    description: "Read a file",
    schema: z.object({ path: z.string() }),
  },
);

function cx(sessionId: string | undefined, more: Partial<ContextdMiddlewareOptions> = {}) {
  return contextdMiddleware({ client, sessionId, ...more });
}

describe("LangChain createAgent middleware on contextd", () => {
  it("runs a 30-step tool loop in which contextd compacts, the model sees contextd's assembled context, and every message is stored once", async () => {
    const before = model.requests().length;
    // The real client, counting the messages each AppendMessages carries.
    let appended = 0;
    const counting = new ContextdClient({ address: contextd.address });
    const appendMessages = counting.appendMessages.bind(counting);
    counting.appendMessages = (req, o) => {
      appended += req.messages?.length ?? 0;
      return appendMessages(req, o);
    };
    const agent = createAgent({
      model: chat({ "x-tool-loop": "30:loop" }),
      tools: [read],
      systemPrompt: "You read files.",
      middleware: [cx("loop", { tokenBudget: 1500, client: counting })],
    });
    const result = await agent.invoke({ messages: [new HumanMessage("Read probe.txt thirty times.")] }, { recursionLimit: 200 });
    // user, 30 × (tool call, tool result), the answer.
    expect(result.messages).toHaveLength(62);
    expect(result.messages.at(-1)?.text).toBe("Understood.");

    expect(await compactions("loop")).toBeGreaterThan(0);
    const sent = model.requests().slice(before);
    expect(sent).toHaveLength(31);
    // LangChain's own last call holds system + user + 30 × (tool call, result) = 62 messages; the model got contextd's, smaller.
    const last = sent[30].body.messages ?? [];
    expect(last.length).toBeLessThan(62);
    expect(last[0]).toMatchObject({ role: "system" });
    expect(contentText(last[0].content)).toBe("You read files.");
    const assembled = await client.assemble({ session: { sessionId: "loop" }, tokenBudget: 1500 });
    expect(assembled.messages.some((m) => m.metadata["contextd.kind"] === "compaction_summary")).toBe(true);
    // What the model saw last is what contextd assembles (the final answer is all contextd has added since).
    expect(last.map((m) => contentText(m.content)).filter(Boolean)).toEqual(
      assembled.messages
        .slice(0, -1)
        .map((m) => text(m))
        .filter(Boolean),
    );
    // Tool calls reach the model with their results: every tool message follows its call.
    const callIds = new Set(last.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
    for (const m of last.filter((m) => m.role === "tool")) expect(callIds.has(m.tool_call_id ?? "")).toBe(true);

    const messages = await stored("loop");
    // system, user, 30 × (assistant tool call, tool result), the final answer: each once.
    expect(messages).toHaveLength(63);
    expect(new Set(messages.map((m) => m.key)).size).toBe(63);
    expect(messages[0].message.role).toBe(Role.ROLE_SYSTEM);
    expect(messages.filter((m) => m.message.role === Role.ROLE_TOOL_RESULT).map((m) => m.message.toolCallId)).toEqual(
      Array.from({ length: 30 }, (_, k) => `call_loop_${k + 1}`),
    );
    expect(text(messages[62].message)).toBe("Understood.");
    // Each message went to contextd once: a call sends what is new, not the whole conversation again.
    expect(appended).toBe(63);
    counting.close();
  });

  it("stores a streamed tool loop's answers: agent.stream with streamMode messages streams the model's tokens, and contextd holds every step", async () => {
    const agent = createAgent({ model: chat({ "x-tool-loop": "2:stream" }), tools: [read], middleware: [cx("stream")] });
    const streamed: string[] = [];
    for await (const [chunk] of await agent.stream({ messages: [new HumanMessage("Read twice, then SAY:streamed")] }, { streamMode: "messages" }))
      if (chunk.type === "ai" && chunk.text) streamed.push(chunk.text);
    expect(streamed.join("")).toBe("streamed");
    expect(model.requests().at(-1)?.body.stream).toBe(true);
    const messages = await stored("stream");
    expect(messages.map((m) => m.message.role)).toEqual([
      Role.ROLE_USER,
      Role.ROLE_ASSISTANT,
      Role.ROLE_TOOL_RESULT,
      Role.ROLE_ASSISTANT,
      Role.ROLE_TOOL_RESULT,
      Role.ROLE_ASSISTANT,
    ]);
    expect(text(messages[5].message)).toBe("streamed");
  });

  it("stores the result of a returnDirect tool, which ends the run without another model call, when the run ends", async () => {
    const direct = tool(async ({ path }: { path: string }) => `${path}: returned directly`, {
      name: "read",
      description: "Read a file",
      schema: z.object({ path: z.string() }),
      returnDirect: true,
    });
    const agent = createAgent({ model: chat({ "x-tool-loop": "1:direct" }), tools: [direct], middleware: [cx("direct")] });
    const r = await agent.invoke({ messages: [new HumanMessage("Read it.")] });
    expect(r.messages.at(-1)?.text).toBe("probe.txt: returned directly");
    const messages = await stored("direct");
    expect(messages.map((m) => [m.message.role, m.message.toolCallId])).toEqual([
      [Role.ROLE_USER, ""],
      [Role.ROLE_ASSISTANT, ""],
      [Role.ROLE_TOOL_RESULT, "call_direct_1"],
    ]);
    expect(text(messages[2].message)).toBe("probe.txt: returned directly");
  });

  it("writes nothing twice for a retried call: ChatOpenAI's own retry, LangChain's modelRetryMiddleware, and the app repeating the call", async () => {
    const agent = createAgent({ model: chat(), tools: [], middleware: [cx("retry")] });
    const messages = [new HumanMessage("FAIL_ONCE:retry SAY:again")];
    const first = await agent.invoke({ messages });
    expect(first.messages.at(-1)?.text).toBe("again");
    expect(model.requests().filter((r) => r.answer === "failure" && contentText(r.body.messages?.at(-1)?.content).includes("FAIL_ONCE:retry"))).toHaveLength(1);
    const again = await agent.invoke({ messages });
    expect(again.messages.at(-1)?.text).toBe("again");
    expect((await stored("retry")).map((m) => [m.message.role, text(m.message)])).toEqual([
      [Role.ROLE_USER, "FAIL_ONCE:retry SAY:again"],
      [Role.ROLE_ASSISTANT, "again"],
    ]);

    // The retry middleware outside ours: our wrapModelCall runs twice for the same request.
    const retried = createAgent({
      model: chat({}, 0),
      tools: [],
      middleware: [modelRetryMiddleware({ maxRetries: 2, initialDelayMs: 1, jitter: false }), cx("retry-mw")],
    });
    const r = await retried.invoke({ messages: [new HumanMessage("FAIL_ONCE:retrymw SAY:twice")] });
    expect(r.messages.at(-1)?.text).toBe("twice");
    expect((await stored("retry-mw")).map((m) => [m.message.role, text(m.message)])).toEqual([
      [Role.ROLE_USER, "FAIL_ONCE:retrymw SAY:twice"],
      [Role.ROLE_ASSISTANT, "twice"],
    ]);
  });

  it("answers with LangChain's own messages while contextd is down, and stores every message exactly once when it is back", async () => {
    const failures: string[] = [];
    const agent = createAgent({ model: chat(), tools: [], middleware: [cx("outage", { timeoutMs: 2000, onError: (_e, during) => failures.push(during) })] });
    const history: BaseMessage[] = [];
    const turn = async (say: string) => {
      history.push(new HumanMessage(`SAY:${say}`));
      const r = await agent.invoke({ messages: history });
      history.splice(0, history.length, ...r.messages);
      return r.messages.at(-1)?.text;
    };
    expect(await turn("one")).toBe("one");

    const address = contextd.address;
    await contextd.stop();
    expect(await turn("two")).toBe("two");
    expect(failures).toContain("append");
    expect(failures).toContain("answer");
    // The model got LangChain's own messages: the whole conversation.
    expect((model.requests().at(-1)?.body.messages ?? []).map((m) => contentText(m.content))).toEqual(["SAY:one", "one", "SAY:two"]);

    contextd = await contextd.restart({ config: { listen: address } });
    // The client's channel reconnects on its own; the test waits for that, not for a time.
    await new Promise<void>((resolve, reject) => client.raw.waitForReady(Date.now() + 30_000, (e) => (e ? reject(e) : resolve())));
    const failed = failures.length;
    expect(await turn("three")).toBe("three");
    expect(failures).toHaveLength(failed);

    const rows = await stored("outage");
    expect(rows.map((m) => text(m.message))).toEqual(["SAY:one", "one", "SAY:two", "two", "SAY:three", "three"]);
  });

  it("gives the model contextd's history tools as LangChain tools: the model calls them, a refusal is an error result, and the answer comes from what they found", async () => {
    const agent = createAgent({ model: chat(), tools: contextdTools(client, { sessionId: "tools" }), middleware: [cx("tools")] });
    const first = await agent.invoke({ messages: [new HumanMessage("The invoice_rounding.ts bug is BILL-4821. SAY:noted")] });
    expect(first.messages.at(-1)?.text).toBe("noted");
    const before = model.requests().length;
    const r = await agent.invoke({
      messages: [...first.messages, new HumanMessage('CALL:expand:{"entry_id":"no-such-entry"} CALL:search:{"query":"invoice_rounding"} ECHO_TOOL_RESULT')],
    });
    const sent = model.requests().slice(before);
    const tools = (sent[0].body.tools ?? []) as { function: { name: string; parameters: { properties: object } } }[];
    expect(tools.map((t) => t.function.name)).toEqual(["search", "expand", "context", "sessions"]);
    expect(Object.keys(tools[0].function.parameters.properties)).toContain("query");
    // The model's answer is the search result it read: the first turn's message, the hit marked.
    expect(r.messages.at(-1)?.text).toContain("The «invoice_rounding».ts bug is BILL-4821.");

    const rows = (await stored("tools")).map((m) => m.message);
    const results = rows.filter((m) => m.role === Role.ROLE_TOOL_RESULT);
    expect(results.map((m) => [m.toolName, m.isError])).toEqual([
      ["expand", true],
      ["search", false],
    ]);
    expect(text(results[0])).toMatch(/entry/i);
    expect(text(results[1])).toContain("BILL-4821");
  });

  it("keeps each thread in the session its thread_id names, and passes a run with no session through untouched", async () => {
    const agent = createAgent({ model: chat(), tools: [], middleware: [cx(undefined)] });
    await agent.invoke({ messages: [new HumanMessage("SAY:a")] }, { configurable: { thread_id: "thread-a" } });
    await agent.invoke({ messages: [new HumanMessage("SAY:b")] }, { configurable: { thread_id: "thread-b" } });
    expect((await stored("thread-a")).map((m) => text(m.message))).toEqual(["SAY:a", "a"]);
    expect((await stored("thread-b")).map((m) => text(m.message))).toEqual(["SAY:b", "b"]);
    const before = (await client.listSessions({})).sessions.length;
    const r = await agent.invoke({ messages: [new HumanMessage("SAY:untracked")] });
    expect(r.messages.at(-1)?.text).toBe("untracked");
    expect((await client.listSessions({})).sessions.length).toBe(before);
  });
});
