/**
 * The one stand-in of the OpenClaw tests: a small OpenAI-compatible chat-completions server on a
 * random loopback port, speaking the real protocol (JSON, and server-sent events when the client
 * asks for `stream: true`, as OpenClaw always does). It records every request, so a test can see
 * exactly what the model was sent.
 *
 * Replies: the newest user text holding `SAY:<token>` is answered with `<token>`; anything else with
 * a fixed sentence. A prompt holding `OVERFLOW_ONCE:<tag>` is answered, the first time only, with
 * the provider error OpenClaw treats as a context overflow (400 `context_length_exceeded`).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatMessage {
  role: string;
  content: unknown;
}

export interface RecordedRequest {
  n: number;
  path: string;
  body: { model?: string; stream?: boolean; messages?: ChatMessage[]; [k: string]: unknown };
  /** How it was answered: "reply" or "overflow". */
  answer: "reply" | "overflow";
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

export async function startModelServer(): Promise<ModelServer> {
  const recorded: RecordedRequest[] = [];
  const overflowed = new Set<string>();
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
      const users = (body.messages ?? []).filter((m) => m.role === "user").map((m) => contentText(m.content));
      const prompt = [...users].reverse().find((t) => !t.includes(INTERNAL_CONTEXT)) ?? "";
      const overflow = /OVERFLOW_ONCE:(\w+)/.exec(prompt);
      const n = recorded.length + 1;
      if (overflow && !overflowed.has(overflow[1])) {
        overflowed.add(overflow[1]);
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
    requests: () => [...recorded],
    textOf: (r) => (r.body.messages ?? []).map((m) => contentText(m.content)).join("\n"),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function answer(res: http.ServerResponse, body: RecordedRequest["body"], text: string, n: number): void {
  const id = `chatcmpl-${n}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model ?? "fake-model";
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const send = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  const chunk = (delta: unknown, finish: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  send(chunk({ role: "assistant", content: "" }, null));
  send(chunk({ content: text }, null));
  send(chunk({}, "stop"));
  if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage)
    send({ id, object: "chat.completion.chunk", created, model, choices: [], usage });
  res.write("data: [DONE]\n\n");
  res.end();
}
