/**
 * integrations/openai-agents/README.md's example, run as written: its TypeScript block is written to
 * a file and imported, against a real contextd and the Chat Completions stand-in (OPENAI_BASE_URL).
 * The stand-in answers the second question by calling the `search` tool the example gives the agent.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ContextdClient } from "contextd/client";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { completion, startChatServer, type ChatServer, type RecordedRequest, type Reply } from "../../summarizer/chat-server.js";
import { messagesOf } from "./agents-stack.js";

let model: ChatServer;
let contextd: ContextdProcess;
const README = path.join(REPO_ROOT, "integrations/openai-agents/README.md");

function exampleBlock(): string {
  const text = fs.readFileSync(README, "utf8");
  const m = /## Example\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error("no ```ts block under ## Example in " + README);
  return m[1];
}

function answer(req: RecordedRequest): Reply {
  const last = messagesOf(req).at(-1);
  const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
  if (last?.role === "user" && /Search the history/.test(text))
    return {
      json: {
        id: "chatcmpl-s",
        object: "chat.completion",
        created: 1,
        model: "stand-in",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_s", type: "function", function: { name: "search", arguments: '{"query":"invoice"}' } }],
            },
            finish_reason: "tool_calls",
          },
        ],
      },
    };
  if (last?.role === "tool") return completion(`From the history: ${/BILL-\d+/.exec(text)?.[0] ?? "nothing"}`);
  return completion("Noted.");
}

beforeAll(async () => {
  model = await startChatServer();
  model.respond = answer;
  contextd = await startContextd();
});

afterAll(async () => {
  await contextd?.cleanup();
  await model?.close();
});

describe("integrations/openai-agents/README.md", () => {
  it("its example runs as written: two turns kept in contextd, the second answered through the search tool", async () => {
    Object.assign(process.env, {
      CONTEXTD_ADDRESS: contextd.address,
      OPENAI_BASE_URL: model.baseUrl,
      OPENAI_API_KEY: "test-key",
      OPENAI_AGENTS_DISABLE_TRACING: "1",
    });
    const dir = path.join(REPO_ROOT, "test/.tmp");
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `openai-agents-readme-${process.pid}.ts`);
    fs.writeFileSync(file, exampleBlock());
    const log = vi.spyOn(console, "log");
    try {
      await import(file);
    } finally {
      fs.rmSync(file, { force: true });
    }
    expect(log).toHaveBeenCalledWith("From the history: BILL-4821");

    // The model was offered the history tools, and contextd holds both turns.
    const tools = (model.requests[0].body as unknown as { tools: Array<{ function: { name: string } }> }).tools.map((t) => t.function.name);
    expect(tools).toEqual(["search", "expand", "context", "sessions"]);
    const cx = new ContextdClient({ address: contextd.address });
    const info = await cx.getSession({ session: { sessionId: "support-42" } });
    cx.close();
    // user, assistant; user, search call, search result, assistant.
    expect(info.info!.messageCount).toBe(6);
  });
});
