/**
 * The Agents SDK against the chat-completions stand-in (test/summarizer/chat-server.ts) and a real
 * contextd: the SDK's default model provider speaks Chat Completions to the stand-in, tracing off.
 * `scriptedModel` answers like a model would from the request's last message: a user message
 * asking for the weather gets a `get_weather` call, one about billing a handoff to `billing`,
 * a tool result or anything else a text answer. A request that asks for `stream: true` (a run with
 * `stream: true`) gets the same answer as server-sent chunks.
 */
import { OpenAIProvider, setDefaultModelProvider, setTracingDisabled } from "@openai/agents";
import { completion, streamed, type RecordedRequest, type Reply } from "../../summarizer/chat-server.js";

export function useStandIn(baseUrl: string): void {
  setDefaultModelProvider(new OpenAIProvider({ baseURL: baseUrl, apiKey: "test-key", useResponses: false }));
  setTracingDisabled(true);
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

export function messagesOf(req: RecordedRequest): ChatMessage[] {
  return ((req.body as unknown as { messages?: ChatMessage[] })?.messages ?? []) as ChatMessage[];
}

/** Everything a request shows the model, as one string (to look for a text in it). */
export function requestText(req: RecordedRequest): string {
  return JSON.stringify(messagesOf(req));
}

/** A chat.completion that calls the tool `name` with `args` (JSON text), under call id `id`. */
export function toolCallReply(id: string, name: string, args: string): Reply {
  return {
    json: {
      id: `chatcmpl-${id}`,
      object: "chat.completion",
      created: 1_700_000_000,
      model: "stand-in",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name, arguments: args } }] },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    },
  };
}

const contentText = (c: unknown): string => (typeof c === "string" ? c : JSON.stringify(c ?? ""));

export function scriptedModel(req: RecordedRequest): Reply {
  return streamed(scriptedAnswer(req), req);
}

function scriptedAnswer(req: RecordedRequest): Reply {
  const messages = messagesOf(req);
  const last = messages.at(-1);
  const text = contentText(last?.content);
  if (last?.role === "tool") return completion(`Done (request ${req.index}): ${text.slice(0, 60)}`);
  if (last?.role === "user" && /weather/i.test(text)) return toolCallReply(`call_w${req.index}`, "get_weather", '{"city":"Paris"}');
  if (last?.role === "user" && /billing/i.test(text) && !messages.some((m) => m.role === "system" && /billing agent/i.test(contentText(m.content))))
    return toolCallReply(`call_h${req.index}`, "transfer_to_billing", "{}");
  return completion(`Answer ${req.index} to: ${text.slice(0, 60)}`);
}
