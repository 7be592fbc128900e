import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Agent, run, tool, type AgentInputItem } from "@openai/agents";
import { z } from "zod";
import { ContextdClient, status } from "contextd/client";
import { ContextdSession, PopUnsupportedError, messageToItem } from "@contextd/openai-agents";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { getFreePort } from "../../helpers/free-port.js";
import { startChatServer, type ChatServer } from "../../summarizer/chat-server.js";
import { requestText, scriptedModel, useStandIn } from "./agents-stack.js";
import { ITEMS } from "../../fixtures/openai-agents-items.js";

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

/** The session's transcript in contextd, as items, with the message key of each. */
async function storedItems(sessionId: string): Promise<Array<{ key: string; item: AgentInputItem }>> {
  const out: Array<{ key: string; item: AgentInputItem }> = [];
  for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "message") out.push({ key: e.messageKey, item: messageToItem(e.entry.value) });
  return out;
}

/** A text of the item that the chat-completions request must show when the item was sent. */
const marker = (i: AgentInputItem): string => {
  const o = i as { callId?: string; content?: unknown; output?: unknown };
  if (o.callId) return o.callId;
  if (typeof o.content === "string") return o.content;
  return (o.content as Array<{ text: string }>)[0].text;
};

const kind = (i: AgentInputItem): string => {
  const o = i as { type?: string; role?: string; name?: string };
  if (o.type === "function_call" || o.type === "function_call_result") return `${o.type}:${o.name}`;
  return o.role ?? o.type ?? "?";
};

describe("ContextdSession with run(agent, input, { session })", () => {
  it("stores every item of turns with a tool call and a handoff once, and the model gets contextd's context", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "agents-turns", tokenBudget: 32_000 });
    const r1 = await run(triage, "What is the weather in Paris?", { session });
    expect(r1.finalOutput).toMatch(/^Done/);
    const r2 = await run(triage, "I have a billing question", { session });
    expect(r2.lastAgent?.name).toBe("billing");
    await run(triage, "Thanks, that is all", { session });

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
    // Each stored once, under its own key.
    expect(new Set(stored.map((s) => s.key)).size).toBe(stored.length);
    expect(stored.every((s) => s.key.startsWith("openai-agents:"))).toBe(true);
    // The calls and their results pair up by call id, as the SDK made them.
    const calls = stored.filter((s) => (s.item as { type?: string }).type === "function_call").map((s) => (s.item as { callId: string }).callId);
    const results = stored.filter((s) => (s.item as { type?: string }).type === "function_call_result").map((s) => (s.item as { callId: string }).callId);
    expect(results).toEqual(calls);

    // The last turn's request carried contextd's assembled context: every message of it, then the new prompt.
    const assembled = session.lastAssembly!;
    expect(assembled.messages).toHaveLength(8);
    const lastRequest = model.requests.at(-1)!;
    const sent = requestText(lastRequest);
    for (const s of stored.slice(0, 8)) expect(sent).toContain(JSON.stringify(marker(s.item)).slice(1, -1));
    expect(sent).toContain("Thanks, that is all");
  });

  it("with a small budget contextd compacts, and the model gets the summary and a context within the budget", async () => {
    const budget = 400;
    const session = new ContextdSession({ client: cx, sessionId: "agents-compact", tokenBudget: budget });
    const filler = "The ledger reconciliation for account seven listed many entries worth checking again carefully. ".repeat(4);
    for (let turn = 1; turn <= 8; turn++) await run(triage, `Turn ${turn}: ${filler}`, { session });

    const info = await cx.getSession({ session: { sessionId: session.sessionId } });
    expect(info.info!.compactionCount).toBeGreaterThan(0);
    const assembled = session.lastAssembly!;
    expect(assembled.estimatedTokens).toBeLessThanOrEqual(budget);
    const summary = assembled.messages.find((m) => m.metadata["contextd.kind"] === "compaction_summary");
    expect(summary).toBeDefined();
    // The model's last request opened its history with that summary, not with the first turns.
    const sent = requestText(model.requests.at(-1)!);
    expect(sent).toContain(JSON.stringify(messageToItem(summary!)).match(/"content":"(.{30})/)![1]);
    expect(sent).not.toContain("Turn 1:");
    // The transcript still holds all ten messages once.
    expect((await storedItems(session.sessionId)).length).toBe(16);
  });

  it("contextd unreachable: the run goes on from the session's own items, and once contextd is back they are delivered once", async () => {
    const unreachable: string[] = [];
    const session = new ContextdSession({ client: cx, sessionId: "agents-outage", timeoutMs: 3_000, onUnreachable: (_e, during) => unreachable.push(during) });
    await run(triage, "First question about apples", { session });

    await contextd.stop();
    const during = await run(triage, "Second question about pears", { session });
    expect(during.finalOutput).toMatch(/^Answer/);
    expect(unreachable).toContain("getItems");
    expect(unreachable).toContain("addItems");
    // The model still got the first turn (contextd's last context) and the new prompt.
    const sentDuring = requestText(model.requests.at(-1)!);
    expect(sentDuring).toContain("First question about apples");
    expect(sentDuring).toContain("Second question about pears");
    expect(session.undelivered).toBe(2);

    contextd = await contextd.restart();
    await new Promise<void>((resolve, reject) => cx.raw.waitForReady(Date.now() + 15_000, (e) => (e ? reject(e) : resolve())));
    await run(triage, "Third question about plums", { session });
    expect(session.undelivered).toBe(0);
    const sentAfter = requestText(model.requests.at(-1)!);
    for (const t of ["apples", "pears", "plums"]) expect(sentAfter).toContain(t);

    const stored = await storedItems(session.sessionId);
    expect(stored.map((s) => kind(s.item))).toEqual(["user", "assistant", "user", "assistant", "user", "assistant"]);
    expect(JSON.stringify(stored.map((s) => s.item))).toMatch(/apples.*Answer.*pears.*Answer.*plums.*Answer/);
    // Delivering again changes nothing: the keys make a resend harmless.
    await session.flush();
    expect((await storedItems(session.sessionId)).length).toBe(6);
  });

  it("keeps an item of every type as it was added, in the transcript and in the assembled context", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "agents-every-item" });
    const items = Object.values(ITEMS);
    await session.addItems(items);
    expect((await storedItems(session.sessionId)).map((s) => s.item)).toEqual(items);
    expect(await session.getItems()).toEqual(items);
    expect(await session.getItems(3)).toEqual(items.slice(-3));
  });

  it("a refusal that waiting will not heal is thrown, not queued for a catch-up that can never succeed", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "x".repeat(300) });
    await expect(session.addItems([{ role: "user", content: "hello" }])).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    expect(session.undelivered).toBe(0);
  });

  it("popItem removes an item contextd does not hold yet, refuses one it holds, and clearSession deletes the session", async () => {
    const session = new ContextdSession({ client: cx, sessionId: "agents-pop", timeoutMs: 3_000 });
    expect(await session.popItem()).toBeUndefined();
    await session.addItems([{ role: "user", content: "kept" }]);
    await expect(session.popItem()).rejects.toBeInstanceOf(PopUnsupportedError);
    expect(await session.getItems()).toEqual([{ role: "user", content: "kept" }]);

    await session.clearSession();
    await expect(cx.getSession({ session: { sessionId: session.sessionId } })).rejects.toMatchObject({ code: status.NOT_FOUND });
    expect(await session.getItems()).toEqual([]);
  });
});
