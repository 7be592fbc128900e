/**
 * ContextdSession under streamed runs: `run(agent, input, { session, stream: true })` with the real
 * `@openai/agents` against the chat-completions stand-in, which answers `stream: true` requests with
 * server-sent chunks (test/summarizer/chat-server.ts, `streamed`). A streamed run persists its input
 * when the stream starts and its output as each turn ends — a different path through the SDK than
 * a run without a stream — and must keep the same promises: history kept in contextd, the model
 * sent contextd's (compacted) context, tool calls and handoffs round-trip, nothing stored twice.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Agent, MemorySession, run, tool, type AgentInputItem, type Session } from "@openai/agents";
import { z } from "zod";
import { ContextdClient } from "contextd/client";
import { ContextdSession, messageToItem } from "@contextd/openai-agents";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { getFreePort } from "../../helpers/free-port.js";
import { completion, startChatServer, streamed, type ChatServer, type Reply } from "../../summarizer/chat-server.js";
import { messagesOf, requestText, scriptedModel, toolCallReply, useStandIn } from "./agents-stack.js";

let model: ChatServer;
let contextd: ContextdProcess;
let cx: ContextdClient;

const getWeather = tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}, 21°C`,
});
const billing = new Agent({ name: "billing", instructions: "You are the billing agent.", handoffDescription: "Billing questions" });
const triage = new Agent({ name: "triage", instructions: "You are the triage agent.", tools: [getWeather], handoffs: [billing] });

beforeAll(async () => {
  model = await startChatServer();
  model.respond = scriptedModel;
  useStandIn(model.baseUrl);
  // A fixed port, so that the client's address still holds after a restart (the outage test).
  const port = await getFreePort();
  contextd = await startContextd({ config: { listen: `127.0.0.1:${port}`, compaction: { keep_recent_tokens: 60 } } });
  cx = new ContextdClient({ address: contextd.address });
});

afterAll(async () => {
  cx?.close();
  await contextd?.cleanup();
  await model?.close();
});

afterEach(() => {
  model.reset();
  model.respond = scriptedModel;
});

/** Runs `input` as a streamed run, reading the stream to its end as an application does; answers the run's text as it streamed and the result. */
async function streamRun(agent: Agent, input: string | AgentInputItem[], session: Session) {
  const result = await run(agent, input, { session, stream: true });
  let streamedText = "";
  for await (const chunk of result.toTextStream()) streamedText += chunk;
  await result.completed;
  if (result.error) throw result.error;
  return { streamedText, result };
}

/** The session's transcript in contextd, as items, with the message key of each. */
async function storedItems(sessionId: string): Promise<Array<{ key: string; item: AgentInputItem }>> {
  const out: Array<{ key: string; item: AgentInputItem }> = [];
  for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "message") out.push({ key: e.messageKey, item: messageToItem(e.entry.value) });
  return out;
}

const kind = (i: AgentInputItem): string => {
  const o = i as { type?: string; role?: string; name?: string };
  if (o.type === "function_call" || o.type === "function_call_result") return `${o.type}:${o.name}`;
  return o.role ?? o.type ?? "?";
};

/** What an item says, without the ids the SDK makes up per run: kind, text, call arguments and outputs. */
const gist = (i: AgentInputItem): string => {
  const o = i as { content?: unknown; arguments?: string; output?: unknown; name?: string };
  const text = typeof o.content === "string" ? o.content : JSON.stringify((o.content as Array<{ text?: string }> | undefined)?.map((c) => c.text) ?? null);
  return `${kind(i)} ${text} ${o.arguments ?? ""} ${JSON.stringify(o.output ?? null)}`.replace(/request \d+/g, "request N").replace(/Answer \d+/g, "Answer N");
};

describe("ContextdSession with streamed runs (run(agent, input, { session, stream: true }))", () => {
  it("stores every item of streamed turns with a tool call and a handoff once, the same as a run without a stream, and the model gets contextd's context", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "stream-turns", tokenBudget: 32_000 });
    const weather = await streamRun(triage, "What is the weather in Paris?", session);
    expect(weather.result.finalOutput).toMatch(/^Done/);
    // The answer reached the application through the stream, chunk by chunk.
    expect(weather.streamedText).toBe(weather.result.finalOutput);
    const handoff = await streamRun(triage, "I have a billing question", session);
    expect(handoff.result.lastAgent?.name).toBe("billing");
    await streamRun(triage, "Thanks, that is all", session);
    // Every model request of these runs was a streamed one.
    expect(model.requests.length).toBeGreaterThanOrEqual(5);
    expect(model.requests.every((r) => r.body?.stream === true)).toBe(true);

    const stored = await storedItems(session.sessionId);
    expect(stored.map((s) => kind(s.item))).toEqual([
      "user",
      "function_call:get_weather",
      "function_call_result:get_weather",
      "assistant",
      "user",
      "function_call:transfer_to_billing",
      "function_call_result:transfer_to_billing",
      "assistant",
      "user",
      "assistant",
    ]);
    expect(new Set(stored.map((s) => s.key)).size).toBe(stored.length);
    expect(stored.every((s) => s.key.startsWith("openai-agents:"))).toBe(true);
    // Calls and their results pair up by call id, and the streamed arguments arrived whole.
    const calls = stored.filter((s) => (s.item as { type?: string }).type === "function_call").map((s) => s.item as { callId: string; arguments: string });
    const results = stored.filter((s) => (s.item as { type?: string }).type === "function_call_result").map((s) => (s.item as { callId: string }).callId);
    expect(results).toEqual(calls.map((c) => c.callId));
    expect(calls[0].arguments).toBe('{"city":"Paris"}');

    // The last turn's request carried contextd's assembled context (the eight items before it), then the new prompt.
    expect(session.lastAssembly!.messages).toHaveLength(8);
    const sent = requestText(model.requests.at(-1)!);
    for (const c of calls) expect(sent).toContain(c.callId);
    expect(sent).toContain("sunny in Paris");
    expect(sent).toContain("Thanks, that is all");

    // The same conversation without a stream stores the same items.
    model.reset();
    model.respond = scriptedModel;
    const plain = new ContextdSession({ client: cx, sessionId: "stream-turns-plain", tokenBudget: 32_000 });
    for (const input of ["What is the weather in Paris?", "I have a billing question", "Thanks, that is all"]) await run(triage, input, { session: plain });
    expect(model.requests.every((r) => r.body?.stream !== true)).toBe(true);
    expect((await storedItems(plain.sessionId)).map((s) => gist(s.item))).toEqual(stored.map((s) => gist(s.item)));
  });

  it("with a small budget contextd compacts, and each streamed request opens with the summary within the budget", async () => {
    const budget = 400;
    const session = new ContextdSession({ client: cx, sessionId: "stream-compact", tokenBudget: budget });
    const filler = "The ledger reconciliation for account seven listed many entries worth checking again carefully. ".repeat(4);
    for (let turn = 1; turn <= 8; turn++) await streamRun(triage, `Turn ${turn}: ${filler}`, session);

    const info = await cx.getSession({ session: { sessionId: session.sessionId } });
    expect(info.info!.compactionCount).toBeGreaterThan(0);
    const assembled = session.lastAssembly!;
    expect(assembled.estimatedTokens).toBeLessThanOrEqual(budget);
    const summary = assembled.messages.find((m) => m.metadata["contextd.kind"] === "compaction_summary");
    expect(summary).toBeDefined();
    const sent = requestText(model.requests.at(-1)!);
    expect(sent).toContain(JSON.stringify(messageToItem(summary!)).match(/"content":"(.{30})/)![1]);
    expect(sent).not.toContain("Turn 1:");
    // The transcript holds all sixteen items (eight turns of a prompt and an answer), each once.
    const stored = await storedItems(session.sessionId);
    expect(stored.map((s) => kind(s.item))).toEqual(Array.from({ length: 8 }, () => ["user", "assistant"]).flat());
    expect(new Set(stored.map((s) => s.key)).size).toBe(16);
  });

  it("contextd unreachable: a streamed run with a tool call goes on from the session's own items, and once contextd is back they are delivered once", async () => {
    const unreachable: string[] = [];
    const session = new ContextdSession({
      client: cx,
      sessionId: "stream-outage",
      timeoutMs: 3_000,
      onUnreachable: (_e, during) => unreachable.push(during),
    });
    await streamRun(triage, "First question about apples", session);

    await contextd.stop();
    const during = await streamRun(triage, "What is the weather in pear town?", session);
    expect(during.result.finalOutput).toMatch(/^Done/);
    expect(unreachable).toContain("getItems");
    expect(unreachable).toContain("addItems");
    // The model still got the first turn (contextd's last context) and the new prompt.
    const sentDuring = requestText(model.requests.at(-1)!);
    expect(sentDuring).toContain("First question about apples");
    expect(sentDuring).toContain("pear town");
    // The prompt, the call, its result and the answer wait for contextd.
    expect(session.undelivered).toBe(4);

    contextd = await contextd.restart();
    await new Promise<void>((resolve, reject) => cx.raw.waitForReady(Date.now() + 15_000, (e) => (e ? reject(e) : resolve())));
    await streamRun(triage, "Third question about plums", session);
    expect(session.undelivered).toBe(0);
    const sentAfter = requestText(model.requests.at(-1)!);
    for (const t of ["apples", "pear town", "sunny in Paris", "plums"]) expect(sentAfter).toContain(t);

    const stored = await storedItems(session.sessionId);
    expect(stored.map((s) => kind(s.item))).toEqual([
      "user",
      "assistant",
      "user",
      "function_call:get_weather",
      "function_call_result:get_weather",
      "assistant",
      "user",
      "assistant",
    ]);
    await session.flush();
    expect((await storedItems(session.sessionId)).length).toBe(8);
  });

  it("contextd goes away in the middle of a streamed run: the run finishes, its items wait in the session and are delivered once, in order, when contextd is back", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "stream-midway", timeoutMs: 3_000 });
    // Two tool calls in one run; the second stops contextd while it runs.
    model.respond = (req) => {
      const toolResults = messagesOf(req).filter((m) => m.role === "tool").length;
      if (toolResults < 2)
        return streamed(toolCallReply(`call_city${toolResults}`, "get_weather", JSON.stringify({ city: toolResults === 0 ? "Paris" : "Lyon" })), req);
      return streamed(completion("Paris and Lyon are sunny"), req);
    };
    const stoppingWeather = tool({
      name: "get_weather",
      description: "The weather in a city",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        if (city === "Lyon") await contextd.stop();
        return `sunny in ${city}, 21°C`;
      },
    });
    const agent = new Agent({ name: "triage", instructions: "You are the triage agent.", tools: [stoppingWeather] });
    const midway = await streamRun(agent, "What is the weather in Paris and Lyon?", session);
    expect(midway.result.finalOutput).toBe("Paris and Lyon are sunny");
    // The SDK stores a streamed run's items when the run ends: all six wait for contextd.
    expect(session.undelivered).toBe(6);

    contextd = await contextd.restart();
    await new Promise<void>((resolve, reject) => cx.raw.waitForReady(Date.now() + 15_000, (e) => (e ? reject(e) : resolve())));
    await session.flush();
    expect(session.undelivered).toBe(0);
    const stored = await storedItems(session.sessionId);
    expect(stored.map((s) => kind(s.item))).toEqual([
      "user",
      "function_call:get_weather",
      "function_call_result:get_weather",
      "function_call:get_weather",
      "function_call_result:get_weather",
      "assistant",
    ]);
    expect(stored.map((s) => (s.item as { callId?: string }).callId ?? "")).toEqual(["", "call_city0", "call_city0", "call_city1", "call_city1", ""]);
    expect(new Set(stored.map((s) => s.key)).size).toBe(6);
  });

  describe("a streamed run that does not finish leaves in contextd what it leaves in the SDK's own MemorySession, and a run with no new input finishes it", () => {
    /** Runs `scenario` once on a MemorySession and once on a ContextdSession; answers what each holds after it, as gists. */
    async function onBoth(name: string, scenario: (session: Session) => Promise<void>): Promise<{ memory: string[]; contextd: string[] }> {
      const memorySession = new MemorySession();
      model.reset();
      await scenario(memorySession);
      const memory = (await memorySession.getItems()).map(gist);
      model.reset();
      const session = new ContextdSession({ client: cx, sessionId: name });
      await scenario(session);
      expect(session.undelivered).toBe(0);
      const stored = await storedItems(name);
      expect(new Set(stored.map((s) => s.key)).size).toBe(stored.length);
      return { memory, contextd: stored.map((s) => gist(s.item)) };
    }

    it("the model refuses the request: the prompt is kept once, and the next run answers it", async () => {
      const refusal: Reply = { status: 400, json: { error: { message: "model unavailable for this request", type: "invalid_request_error" } } };
      const held = await onBoth("stream-refused", async (session) => {
        model.script(refusal);
        model.respond = scriptedModel;
        await expect(streamRun(triage, "What is the weather in Paris?", session)).rejects.toThrow(/model unavailable/);
        // What the session holds now: the SDK stored the prompt when the stream started.
        expect((await session.getItems()).map(gist)).toEqual([gist({ role: "user", content: "What is the weather in Paris?" })]);
        // Trying again without repeating the prompt: the model gets it from the session.
        const again = await streamRun(triage, [], session);
        expect(again.result.finalOutput).toMatch(/^Done/);
        expect(requestText(model.requests.at(-1)!)).toContain("What is the weather in Paris?");
      });
      expect(held.contextd).toEqual(held.memory);
      expect(held.contextd.map((g) => g.split(" ")[0])).toEqual(["user", "function_call:get_weather", "function_call_result:get_weather", "assistant"]);
    });

    it("the application aborts the stream while a tool runs: the prompt is kept once, and the next run redoes the turn", async () => {
      const held = await onBoth("stream-aborted", async (session) => {
        model.respond = scriptedModel;
        let release!: () => void;
        const toolRunning = new Promise<void>((resolve) => (release = resolve));
        const slowWeather = tool({
          name: "get_weather",
          description: "The weather in a city",
          parameters: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            release();
            return `sunny in ${city}, 21°C`;
          },
        });
        const agent = new Agent({ name: "triage", instructions: "You are the triage agent.", tools: [slowWeather] });
        const abort = new AbortController();
        const result = await run(agent, "What is the weather in Paris?", { session, stream: true, signal: abort.signal });
        void toolRunning.then(() => abort.abort());
        for await (const event of result) void event;
        await result.completed;
        expect(result.cancelled).toBe(true);
        const again = await streamRun(agent, [], session);
        expect(again.result.finalOutput).toMatch(/^Done/);
      });
      expect(held.contextd).toEqual(held.memory);
      expect(held.contextd[0]).toBe(gist({ role: "user", content: "What is the weather in Paris?" }));
      expect(held.contextd.filter((g) => g.startsWith("user"))).toHaveLength(1);
    });
  });
});
