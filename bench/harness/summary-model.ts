/**
 * A stand-in summarizer model for benchmarks: an OpenAI-compatible chat-completions server on a
 * random loopback port (POST /v1/chat/completions, JSON, no streaming — what contextd's `openai`
 * summarizer and HostService.Complete send). It answers with an extract of what it was asked to
 * summarize — the opening of each of the request's last message's paragraphs, at most
 * `max_tokens` worth — so a summary carries content of what it replaces, as contextd requires.
 * `usage` is the request's and the answer's characters over 4 (OpenAI reports tokens; the ratio
 * is what o200k gives English prose). It counts every request and the tokens it reported, which
 * is what a benchmark reads: the model calls and tokens an engine spent.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface SummaryModel {
  baseUrl: string;
  /** Requests answered and tokens (prompt + completion) reported, since the start. */
  spent(): { calls: number; tokens: number };
  close(): Promise<void>;
}

interface ChatRequest {
  model?: string;
  max_tokens?: number;
  max_completion_tokens?: number;
  messages?: { role: string; content: unknown }[];
}

const text = (c: unknown): string =>
  typeof c === "string"
    ? c
    : Array.isArray(c)
      ? c.map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("")
      : "";

/** Request bodies larger than this are refused (413), as a provider would. */
const MAX_BODY = 32 * 1024 * 1024;

/** The first sentence-ish of every paragraph of `prompt`, up to `maxChars`. */
function extract(prompt: string, maxChars: number): string {
  const out: string[] = [];
  let used = 0;
  for (const para of prompt.split(/\n\s*\n|\n(?=[-#*<])/)) {
    const line = para.trim().split("\n")[0].slice(0, 160);
    if (!line) continue;
    if (used + line.length + 3 > maxChars) break;
    out.push(`- ${line}`);
    used += line.length + 3;
  }
  return out.join("\n") || prompt.slice(0, maxChars);
}

export async function startSummaryModel(): Promise<SummaryModel> {
  let calls = 0;
  let tokens = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on("end", () => {
      const reply = (code: number, body: unknown) => {
        res.writeHead(code, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (size > MAX_BODY) return reply(413, { error: { message: "request too large", type: "invalid_request_error" } });
      if (req.method !== "POST" || !/\/chat\/completions\/?$/.test(new URL(req.url ?? "/", "http://x").pathname))
        return reply(404, { error: { message: `not found: ${req.method} ${req.url}` } });
      let body: ChatRequest;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
      } catch {
        return reply(400, { error: { message: "invalid JSON", type: "invalid_request_error" } });
      }
      const messages = body.messages ?? [];
      const promptChars = messages.reduce((a, m) => a + text(m.content).length, 0);
      const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? 1024;
      const answer = extract(text(messages.at(-1)?.content), Math.max(200, maxTokens * 4));
      const usage = { prompt_tokens: Math.ceil(promptChars / 4), completion_tokens: Math.ceil(answer.length / 4) };
      calls++;
      tokens += usage.prompt_tokens + usage.completion_tokens;
      reply(200, {
        id: `chatcmpl-${calls}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? "bench-summarizer",
        choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    spent: () => ({ calls, tokens }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
