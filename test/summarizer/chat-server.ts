/**
 * A real HTTP server (node:http on 127.0.0.1, port 0) that speaks the OpenAI chat-completions
 * protocol, for the summarizer and HostService.Complete tests.
 *
 *   const server = await startChatServer();
 *   server.script({ status: 429, headers: { "retry-after": "1" } }, HANG);   // the next two requests
 *   server.respond = (req) => completion(`summary of ${promptOf(req).length} chars`); // everything after
 *   ... point the client at server.baseUrl ...
 *   await server.waitFor((reqs) => reqs.length === 2);
 *   await server.waitForAbort(1);   // request #1 was closed by the client before it was answered
 *
 * Every request is recorded (headers, parsed JSON body, arrival time) and answered with the next
 * scripted reply, else `respond(req)`. A reply with `events` is sent as server-sent events, each
 * `data: <json>` then `data: [DONE]`, the way the API streams; `streamed(reply, req)` turns a
 * chat.completion reply into the chunks the API sends for it when the request asked for `stream: true`. `HANG` never answers: the request stays open until the
 * client gives up (its timeout or cancellation), which is recorded as `aborted`. Waiting is event
 * driven: `waitFor` re-checks its predicate on every arrival and every abort.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  index: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body parsed as JSON (undefined when it is not JSON). */
  body: ChatBody | undefined;
  rawBody: string;
  receivedAtMs: number;
  /** The client closed the connection before the reply was sent. */
  aborted: boolean;
  abortedAtMs?: number;
}

export interface ChatBody {
  model: string;
  messages: Array<{ role: string; content: string }>;
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

export type Reply = { status?: number; headers?: Record<string, string>; json?: unknown; body?: string; events?: unknown[] } | typeof HANG;

export const HANG = Symbol("hang");

export interface ChatServer {
  /** `http://127.0.0.1:<port>/v1` — what `base_url` is set to. */
  baseUrl: string;
  port: number;
  requests: RecordedRequest[];
  /** Answers every request no scripted reply is left for (default: a summary naming the request). */
  respond: (req: RecordedRequest) => Reply;
  /** Replies for the next requests, in order. */
  script(...replies: Reply[]): void;
  /** Forgets recorded requests and scripted replies, and restores the default responder. */
  reset(): void;
  /** Resolves once `pred(requests)` holds (checked now, on every arrival and every abort). */
  waitFor(pred: (requests: RecordedRequest[]) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves once request `index` has been aborted by the client. */
  waitForAbort(index: number, timeoutMs?: number): Promise<RecordedRequest>;
  close(): Promise<void>;
}

/** A chat.completion answer with `text` as the assistant's content. */
export function completion(text: string, usage = { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150 }): Reply {
  return {
    json: {
      id: "chatcmpl-test",
      object: "chat.completion",
      created: 1_700_000_000,
      model: "test-model-2024",
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
      usage,
    },
  };
}

interface Completion {
  id: string;
  created: number;
  model: string;
  choices: Array<{
    message: { role: string; content: string | null; tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }> };
    finish_reason: string;
  }>;
  usage?: unknown;
}

/**
 * `reply` (a chat.completion) as the chat.completion.chunk events the API streams for it when
 * `req` asked for `stream: true` (else `reply` as it is): the role, the text in two deltas, each
 * tool call's id and name and then its arguments in two deltas, the finish reason, and the usage
 * in a last chunk without choices when the request asked for it (`stream_options.include_usage`).
 */
export function streamed(reply: Reply, req: RecordedRequest): Reply {
  if (reply === HANG || !req.body?.stream || !reply.json) return reply;
  const c = reply.json as Completion;
  const { message, finish_reason } = c.choices[0];
  const chunk = (delta: unknown, finish: string | null = null) => ({
    id: c.id,
    object: "chat.completion.chunk",
    created: c.created,
    model: c.model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const halves = (t: string) => [t.slice(0, Math.ceil(t.length / 2)), t.slice(Math.ceil(t.length / 2))];
  const events: unknown[] = [chunk({ role: "assistant", content: "" })];
  if (message.content) for (const part of halves(message.content)) events.push(chunk({ content: part }));
  (message.tool_calls ?? []).forEach((call, index) => {
    events.push(chunk({ tool_calls: [{ index, id: call.id, type: call.type, function: { name: call.function.name, arguments: "" } }] }));
    for (const part of halves(call.function.arguments)) events.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
  });
  events.push(chunk({}, finish_reason));
  if (req.body.stream_options?.include_usage && c.usage)
    events.push({ id: c.id, object: "chat.completion.chunk", created: c.created, model: c.model, choices: [], usage: c.usage });
  return { status: reply.status, headers: reply.headers, events };
}

/** The user message of a recorded request (the summary prompt). */
export function promptOf(req: RecordedRequest): string {
  return (
    req.body?.messages
      .filter((m) => m.role === "user")
      .map((m) => m.content)
      .join("\n") ?? ""
  );
}

export const defaultResponder = (req: RecordedRequest): Reply => completion(`## Goal\n- summary written by the test model for request ${req.index}`);

export async function startChatServer(): Promise<ChatServer> {
  const requests: RecordedRequest[] = [];
  let queue: Reply[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const rawBody = Buffer.concat(chunks).toString("utf8");
      let body: ChatBody | undefined;
      try {
        body = JSON.parse(rawBody) as ChatBody;
      } catch {
        body = undefined;
      }
      const rec: RecordedRequest = {
        index: requests.length,
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
        rawBody,
        receivedAtMs: Date.now(),
        aborted: false,
      };
      requests.push(rec);
      res.on("close", () => {
        if (!res.writableFinished) {
          rec.aborted = true;
          rec.abortedAtMs = Date.now();
          notify();
        }
      });
      const reply = queue.length > 0 ? queue.shift()! : api.respond(rec);
      if (reply !== HANG && reply.events) {
        res.writeHead(reply.status ?? 200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers });
        for (const e of reply.events) res.write(`data: ${JSON.stringify(e)}\n\n`);
        res.end("data: [DONE]\n\n");
      } else if (reply !== HANG) {
        const text = reply.body ?? JSON.stringify(reply.json ?? {});
        res.writeHead(reply.status ?? 200, { "content-type": reply.body === undefined ? "application/json" : "text/plain", ...reply.headers });
        res.end(text);
      }
      notify();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  const waitFor = (pred: (r: RecordedRequest[]) => boolean, timeoutMs = 15_000): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (!pred(requests)) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(
          new Error(
            `chat server: condition not met within ${timeoutMs} ms; ${requests.length} request(s): ${requests.map((r) => `#${r.index}${r.aborted ? " aborted" : ""}`).join(", ")}`,
          ),
        );
      }, timeoutMs);
      waiters.add(check);
      check();
    });

  const api: ChatServer = {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    respond: defaultResponder,
    script: (...replies) => {
      queue.push(...replies);
    },
    reset: () => {
      requests.length = 0;
      queue = [];
      api.respond = defaultResponder;
    },
    waitFor,
    waitForAbort: async (index, timeoutMs) => {
      await waitFor((r) => r[index]?.aborted === true, timeoutMs);
      return requests[index];
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return api;
}
