/**
 * The one stand-in of the OpenClaw tests: a small OpenAI-compatible chat-completions server on a
 * random loopback port, speaking the real protocol (JSON, and server-sent events when the client
 * asks for `stream: true`, as OpenClaw always does). It records every request, so a test can see
 * exactly what the model was sent.
 *
 * Replies: the newest user text holding `SAY:<token>` is answered with `<token>`; anything else with
 * a fixed sentence. A prompt holding `OVERFLOW_ONCE:<tag>` is answered, the first time only, with
 * the provider error OpenClaw treats as a context overflow (400 `context_length_exceeded`).
 *
 * Tool calls: a prompt holding `TOOLS:<n>:<tag>` is first answered with n tool calls, one response
 * each, to OpenClaw's `read` tool (file `probe.txt` of the workspace) with ids `call_<tag>_<k>` — the
 * underscores are what OpenClaw rewrites in the copy it sends providers — and only then with the
 * reply. `OVERFLOW_AFTER_TOOLS:<tag>` answers the request after the last tool result, once, with the
 * overflow error (overflow recovery in the middle of a tool loop).
 *
 * Any tool: each `CALL:<tool>:<json>` of a prompt (the arguments one JSON object without spaces,
 * `CALL:contextd_search:{"query":"BILL-4821"}`) is answered, in order, with one call to that tool,
 * then the reply. With `ECHO_TOOL_RESULT` the reply is the text of the last tool result the model
 * was sent: the model answers from what the tool found.
 *
 * For runtimes whose prompt the test does not write whole (the AI SDK integration, where contextd
 * replaces the prompt and may compact the `TOOLS:` message away): a request with the header
 * `x-tool-loop: <n>:<tag>` is answered with a tool call to `read` (id `call_<tag>_<k>`) for its first
 * n requests under that tag, counted by the server, then with the reply. `FAIL_ONCE:<tag>` in the
 * newest user text is answered the first time only with a 503 (a provider hiccup a client retries).
 * Tool calls are streamed when the client asks for a stream, else one JSON response.
 *
 * Prompt caching (`startModelServer({ promptCache: true })`): usage is then what an OpenAI-style
 * provider with automatic prefix caching reports — `prompt_tokens` the request's messages (their
 * JSON, 4 characters a token), `prompt_tokens_details.cached_tokens` those of its longest run of
 * leading messages identical to the leading messages of an earlier request (a cache marker such as
 * `cache_control` is not content, as for Anthropic). Unlike OpenAI there is no 1,024-token minimum:
 * test prompts are small. Without the option usage is a fixed 10 + 5 tokens, no cache figures.
 */
import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatMessage {
  role: string;
  content: unknown;
  /** An assistant message's tool calls, as the client sent them back. */
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  /** A tool result's call id (role "tool"). */
  tool_call_id?: string;
}

export interface RecordedRequest {
  n: number;
  path: string;
  body: { model?: string; stream?: boolean; messages?: ChatMessage[]; [k: string]: unknown };
  /** How it was answered: "reply", "overflow", "tool_call" or "failure" (FAIL_ONCE). */
  answer: "reply" | "overflow" | "tool_call" | "failure";
  /** The usage the answer reported (prompt caching on; else the fixed usage, or none for an error). */
  usage?: Usage;
}

export interface ModelServer {
  baseUrl: string;
  requests(): RecordedRequest[];
  /** Every text the model was sent in request `r`, system prompt included, joined. */
  textOf(r: RecordedRequest): string;
  close(): Promise<void>;
}

/** OpenClaw appends this block to the last user message of a turn; it is not the user's prompt. */
const INTERNAL_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

export function contentText(c: unknown): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("");
  return "";
}

export interface ModelServerOptions {
  /** Report prompt-cache usage (see above). */
  promptCache?: boolean;
}

/** A message as the cache keys it: without cache markers, keys sorted. */
function cacheContent(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(cacheContent);
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.keys(v)
        .filter((k) => k !== "cache_control")
        .sort()
        .map((k) => [k, cacheContent((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** The prompt cache of a provider: the hash of every leading-messages prefix it has seen. */
class PrefixCache {
  private readonly seen = new Set<string>();
  /** Prompt and cached tokens of `messages`; remembers their prefixes. */
  usage(messages: unknown[]): { prompt: number; cached: number } {
    let hash = "";
    let chars = 0;
    let cached = 0;
    let hit = true;
    for (const m of messages) {
      const text = JSON.stringify(cacheContent(m));
      chars += text.length;
      hash = createHash("sha256").update(hash).update(text).digest("hex");
      if (hit && this.seen.has(hash)) cached = chars;
      else hit = false;
      this.seen.add(hash);
    }
    return { prompt: Math.ceil(chars / 4), cached: Math.floor(cached / 4) };
  }
}

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const recorded: RecordedRequest[] = [];
  const cache = options.promptCache ? new PrefixCache() : undefined;
  const overflowed = new Set<string>();
  const loops = new Map<string, number>();
  const failed = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://x").pathname.replace(/\/+$/, "");
      if (req.method === "GET" && path.endsWith("/models")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model", created: 0, owned_by: "test" }] }));
        return;
      }
      if (req.method !== "POST" || !path.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `not found: ${req.method} ${req.url}` } }));
        return;
      }
      let body: RecordedRequest["body"];
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as RecordedRequest["body"];
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "invalid JSON" } }));
        return;
      }
      const messages = body.messages ?? [];
      if (cache) {
        const { prompt, cached } = cache.usage(messages);
        usages.set(body, { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5, prompt_tokens_details: { cached_tokens: cached } });
      }
      const users = messages.filter((m) => m.role === "user").map((m) => contentText(m.content));
      const prompt = [...users].reverse().find((t) => !t.includes(INTERNAL_CONTEXT)) ?? "";
      const overflow = /OVERFLOW_ONCE:(\w+)/.exec(prompt);
      const tools = /TOOLS:(\d+):(\w+)/.exec(prompt);
      const afterTools = /OVERFLOW_AFTER_TOOLS:(\w+)/.exec(prompt);
      const calls = [...prompt.matchAll(/CALL:(\w+):(\{\S*\})/g)].map((m) => ({ name: m[1], arguments: m[2] }));
      // Tool results since the prompt's own user message: how far its tool loop has come.
      let promptAt = messages.length - 1;
      while (promptAt >= 0 && !(messages[promptAt].role === "user" && contentText(messages[promptAt].content).includes(prompt))) promptAt--;
      const toolResults = messages.slice(promptAt + 1).filter((m) => m.role === "tool");
      const results = toolResults.length;
      const n = recorded.length + 1;
      const failOnce = /FAIL_ONCE:(\w+)/.exec(prompt);
      if (failOnce && !failed.has(failOnce[1])) {
        failed.add(failOnce[1]);
        recorded.push({ n, path, body, answer: "failure" });
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "overloaded, try again", type: "server_error" } }));
        return;
      }
      const loop = /^(\d+):(\w+)$/.exec(String(req.headers["x-tool-loop"] ?? ""));
      if (loop) {
        const done = loops.get(loop[2]) ?? 0;
        if (done < Number(loop[1])) {
          loops.set(loop[2], done + 1);
          recorded.push({ n, path, body, answer: "tool_call" });
          toolCall(res, body, `call_${loop[2]}_${done + 1}`, n, { name: "read", arguments: JSON.stringify({ path: "probe.txt" }) });
          return;
        }
      }
      const overflowNow =
        (overflow && !overflowed.has(overflow[1]) && overflow[1]) ||
        (afterTools && tools && results >= Number(tools[1]) && !overflowed.has(afterTools[1]) && afterTools[1]);
      if (overflowNow) {
        overflowed.add(overflowNow);
        recorded.push({ n, path, body, answer: "overflow" });
        res.writeHead(400, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            error: {
              message:
                "This model's maximum context length is 32000 tokens. However, your messages resulted in 58000 tokens. Please reduce the length of the messages.",
              type: "invalid_request_error",
              param: "messages",
              code: "context_length_exceeded",
            },
          }),
        );
        return;
      }
      if (tools && results < Number(tools[1])) {
        recorded.push({ n, path, body, answer: "tool_call" });
        toolCall(res, body, `call_${tools[2]}_${results + 1}`, n, { name: "read", arguments: JSON.stringify({ path: "probe.txt" }) });
        return;
      }
      if (results < calls.length) {
        recorded.push({ n, path, body, answer: "tool_call" });
        toolCall(res, body, `call_${n}_${results + 1}`, n, calls[results]);
        return;
      }
      if (prompt.includes("ECHO_TOOL_RESULT") && results > 0) {
        recorded.push({ n, path, body, answer: "reply" });
        answer(res, body, contentText(toolResults[results - 1].content), n);
        return;
      }
      recorded.push({ n, path, body, answer: "reply" });
      const say = [...users]
        .reverse()
        .map((t) => /SAY:([\w.-]+)/.exec(t))
        .find(Boolean);
      answer(res, body, say ? say[1] : "Understood.", n);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests: () => recorded.map((r) => (usages.has(r.body) ? { ...r, usage: usages.get(r.body) } : r)),
    textOf: (r) => (r.body.messages ?? []).map((m) => contentText(m.content)).join("\n"),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The usage of a chat completion, as OpenAI reports it. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

const USAGE: Usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
/** Each request's own usage, when prompt caching is on. */
const usages = new WeakMap<RecordedRequest["body"], Usage>();
const usageOf = (body: RecordedRequest["body"]): Usage => usages.get(body) ?? USAGE;

/**
 * A streamed chat.completion (server-sent events, as OpenClaw always asks for): one chunk per delta,
 * the last with `finish`, then the usage chunk when asked for, then `[DONE]`.
 */
function stream(res: http.ServerResponse, body: RecordedRequest["body"], n: number, deltas: unknown[], finish: string): void {
  const id = `chatcmpl-${n}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model ?? "fake-model";
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const send = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  const chunk = (delta: unknown, finishReason: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  for (const delta of deltas) send(chunk(delta, null));
  send(chunk({}, finish));
  if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage)
    send({ id, object: "chat.completion.chunk", created, model, choices: [], usage: usageOf(body) });
  res.write("data: [DONE]\n\n");
  res.end();
}

/** An answer that calls one tool, its arguments (JSON text) streamed after its name, as providers do (one JSON response when the client asked for no stream). */
function toolCall(res: http.ServerResponse, body: RecordedRequest["body"], callId: string, n: number, call: { name: string; arguments: string }): void {
  if (!body.stream) {
    const whole = { id: callId, type: "function", function: call };
    return json(res, body, n, { role: "assistant", content: null, tool_calls: [whole] }, "tool_calls");
  }
  stream(
    res,
    body,
    n,
    [
      { role: "assistant", content: null, tool_calls: [{ index: 0, id: callId, type: "function", function: { name: call.name, arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: call.arguments } }] },
    ],
    "tool_calls",
  );
}

function answer(res: http.ServerResponse, body: RecordedRequest["body"], text: string, n: number): void {
  if (body.stream) return stream(res, body, n, [{ role: "assistant", content: "" }, { content: text }], "stop");
  json(res, body, n, { role: "assistant", content: text }, "stop");
}

/** A chat.completion as one JSON response (the client did not ask for a stream). */
function json(res: http.ServerResponse, body: RecordedRequest["body"], n: number, message: unknown, finish: string): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      id: `chatcmpl-${n}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? "fake-model",
      choices: [{ index: 0, message, finish_reason: finish }],
      usage: usageOf(body),
    }),
  );
}
