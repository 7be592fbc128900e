import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, tool, wrapLanguageModel, type ModelMessage } from "ai";
import { ContextdClient, Role, textMessage, type Message } from "contextd/client";
import { contextdMiddleware, contextdTools, type ContextdMiddlewareOptions } from "@contextd/ai-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { contentText, startModelServer, type ModelServer } from "../../openclaw/helpers/model-server.js";

/**
 * The AI SDK integration driven through the published `ai` and `@ai-sdk/openai-compatible`
 * (pinned in the root package.json) against a real contextd and the chat-completions stand-in of
 * the OpenClaw tests, on real sockets.
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

const provider = () => createOpenAICompatible({ name: "standin", baseURL: model.baseUrl });

function contextdModel(sessionId: string, more: Partial<ContextdMiddlewareOptions> = {}) {
  return wrapLanguageModel({ model: provider()("fake-model"), middleware: contextdMiddleware({ client, sessionId, ...more }) });
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
const read = tool({
  description: "Read a file",
  inputSchema: z.object({ path: z.string() }),
  execute: async ({ path }, { toolCallId }) => `${path} (${toolCallId}): ${"the quick brown fox jumps over the lazy dog ".repeat(8)}`,
});

describe("AI SDK middleware on contextd", () => {
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
    const result = await generateText({
      model: contextdModel("loop", { tokenBudget: 1500, client: counting }),
      tools: { read },
      stopWhen: stepCountIs(31),
      headers: { "x-tool-loop": "30:loop" },
      system: "You read files.",
      prompt: "Read probe.txt thirty times.",
    });
    expect(result.steps).toHaveLength(31);
    expect(result.steps.slice(0, 30).every((s) => s.finishReason === "tool-calls")).toBe(true);
    expect(result.text).toBe("Understood.");

    expect(await compactions("loop")).toBeGreaterThan(0);
    const sent = model.requests().slice(before);
    expect(sent).toHaveLength(31);
    // The SDK's own last prompt holds system + user + 30 × (tool call, result) = 62 messages; the model got contextd's, smaller.
    const last = sent[30].body.messages ?? [];
    expect(last.length).toBeLessThan(62);
    expect(last[0]).toMatchObject({ role: "system", content: "You read files." });
    const assembled = await client.assemble({ session: { sessionId: "loop" }, tokenBudget: 1500 });
    expect(assembled.messages.some((m) => m.metadata["contextd.kind"] === "compaction_summary")).toBe(true);
    // What the model saw last is what contextd assembles (the final answer is all contextd has added since).
    expect(last.map((m) => contentText(m.content)).filter(Boolean)).toEqual(
      assembled.messages
        .slice(0, -1)
        .map((m) => text(m))
        .filter(Boolean),
    );

    const messages = await stored("loop");
    // system, user, 30 × (assistant tool call, tool result), the final answer: each once.
    expect(messages).toHaveLength(63);
    expect(new Set(messages.map((m) => m.key)).size).toBe(63);
    expect(messages.filter((m) => m.message.role === Role.ROLE_TOOL_RESULT).map((m) => m.message.toolCallId)).toEqual(
      Array.from({ length: 30 }, (_, k) => `call_loop_${k + 1}`),
    );
    expect(text(messages[62].message)).toBe("Understood.");
    // Each message went to contextd once: a call sends what is new, not the whole prompt again.
    expect(appended).toBe(63);
    counting.close();
  });

  it("stores a streamed tool loop's answers when streamText finishes", async () => {
    const result = streamText({
      model: contextdModel("stream"),
      tools: { read },
      stopWhen: stepCountIs(3),
      headers: { "x-tool-loop": "2:stream" },
      prompt: "Read twice, then SAY:streamed",
    });
    expect(await result.text).toBe("streamed");
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
    expect(model.requests().at(-1)?.body.stream).toBe(true);
  });

  it("writes nothing twice for a retried call: the SDK's own retry, and the app repeating the call", async () => {
    const cx = contextdModel("retry");
    const messages: ModelMessage[] = [{ role: "user", content: "FAIL_ONCE:retry SAY:again" }];
    const first = await generateText({ model: cx, messages });
    expect(first.text).toBe("again");
    expect(model.requests().filter((r) => r.answer === "failure")).toHaveLength(1);
    const again = await generateText({ model: cx, messages });
    expect(again.text).toBe("again");
    const rows = await stored("retry");
    expect(rows.map((m) => [m.message.role, text(m.message)])).toEqual([
      [Role.ROLE_USER, "FAIL_ONCE:retry SAY:again"],
      [Role.ROLE_ASSISTANT, "again"],
    ]);
  });

  it("answers with the SDK's own messages while contextd is down, and stores every message exactly once when it is back", async () => {
    const failures: string[] = [];
    const cx = contextdModel("outage", { timeoutMs: 2000, onError: (_e, during) => failures.push(during) });
    const history: ModelMessage[] = [{ role: "user", content: "SAY:one" }];
    const turn = async (say: string) => {
      history.push({ role: "user", content: `SAY:${say}` });
      const r = await generateText({ model: cx, messages: history });
      history.push(...r.response.messages);
      return r.text;
    };
    history.pop();
    expect(await turn("one")).toBe("one");

    const address = contextd.address;
    await contextd.stop();
    expect(await turn("two")).toBe("two");
    expect(failures).toContain("append");
    // The model got the SDK's own messages: the whole conversation.
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

  it("gives the model contextd's history tools in the SDK's own tool format, bound to the session", async () => {
    await client.appendMessages({ session: { sessionId: "tools" }, messages: [textMessage(Role.ROLE_USER, "The invoice_rounding.ts bug is BILL-4821")] });
    const tools = contextdTools(client, { sessionId: "tools" });
    await generateText({ model: provider()("fake-model"), tools, prompt: "SAY:listed" });
    const sent = (model.requests().at(-1)?.body.tools ?? []) as { function: { name: string; parameters: { properties: object } } }[];
    expect(sent.map((t) => t.function.name)).toEqual(["search", "expand", "context", "sessions"]);
    expect(Object.keys(sent[0].function.parameters.properties)).toContain("query");

    const call = { toolCallId: "t1", messages: [] };
    const found = await tools.search.execute?.({ query: "BILL-4821" }, call);
    expect(found).toMatch(/invoice_rounding\.ts/);
    // A refusal is the tool's error (the SDK hands it to the model), naming what to fix.
    await expect(tools.expand.execute?.({ entry_id: "no-such-entry" }, call)).rejects.toThrow(/entry/i);
  });

  it("routes each call to the session its providerOptions name, and passes a call with no session through untouched", async () => {
    const shared = wrapLanguageModel({ model: provider()("fake-model"), middleware: contextdMiddleware({ client }) });
    await generateText({ model: shared, prompt: "SAY:a", providerOptions: { contextd: { sessionId: "per-call-a" } } });
    await generateText({ model: shared, prompt: "SAY:b", providerOptions: { contextd: { sessionId: "per-call-b" } } });
    expect((await stored("per-call-a")).map((m) => text(m.message))).toEqual(["SAY:a", "a"]);
    expect((await stored("per-call-b")).map((m) => text(m.message))).toEqual(["SAY:b", "b"]);
    const before = (await client.listSessions({})).sessions.length;
    expect((await generateText({ model: shared, prompt: "SAY:untracked" })).text).toBe("untracked");
    expect((await client.listSessions({})).sessions.length).toBe(before);
  });
});
