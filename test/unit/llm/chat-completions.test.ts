import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ChatCompletionsClient, retryAfter, type ChatCompletionsOptions, type RetryInfo } from "../../../src/llm/chat-completions.js";
import {
  ModelError,
  ModelRateLimitedError,
  ModelRejectedError,
  ModelResponseError,
  ModelTimeoutError,
  ModelUnavailableError,
} from "../../../src/llm/model-errors.js";
import { completion, HANG, startChatServer, type ChatServer } from "../../summarizer/chat-server.js";

const KEY = "sk-test-0123456789abcdef";

describe("ChatCompletionsClient over a real socket", () => {
  let server: ChatServer;
  beforeAll(async () => {
    server = await startChatServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => server.reset());

  const client = (o: Partial<ChatCompletionsOptions> = {}) =>
    new ChatCompletionsClient({ baseUrl: server.baseUrl, model: "test-model", apiKey: KEY, timeoutMs: 5_000, maxRetries: 3, retryBaseDelayMs: 5, ...o });
  const ask = (c: ChatCompletionsClient, signal?: AbortSignal) =>
    c.complete({
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello" },
      ],
      maxTokens: 64,
      signal,
    });
  const failure = async (p: Promise<unknown>): Promise<ModelError> => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModelError);
    return err as ModelError;
  };

  it("POSTs {base_url}/chat/completions with the bearer key and returns the text and usage", async () => {
    server.script(completion("Hi there.", { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 }));
    const c = await ask(client({ temperature: 0.2 }));
    expect(c).toEqual({ text: "Hi there.", finishReason: "stop", model: "test-model-2024", usage: { input: 11, output: 3, total: 14 }, attempts: 1 });
    const [req] = server.requests;
    expect(req.method).toBe("POST");
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers["content-type"]).toBe("application/json");
    expect(req.body).toEqual({
      model: "test-model",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello" },
      ],
      stream: false,
      max_tokens: 64,
      temperature: 0.2,
    });
  });

  it("sends max_completion_tokens when configured, and no Authorization header without a key", async () => {
    server.script(completion("ok"));
    await ask(client({ maxTokensParam: "max_completion_tokens", apiKey: undefined }));
    expect(server.requests[0].body).toMatchObject({ max_completion_tokens: 64 });
    expect(server.requests[0].body).not.toHaveProperty("max_tokens");
    expect(server.requests[0].headers.authorization).toBeUndefined();
  });

  it("accepts content as a list of text parts", async () => {
    server.script({
      json: {
        choices: [
          {
            message: {
              role: "assistant",
              content: [
                { type: "text", text: "part one, " },
                { type: "text", text: "part two" },
              ],
            },
          },
        ],
      },
    });
    expect((await ask(client())).text).toBe("part one, part two");
  });

  it("retries 429 after the server's Retry-After, then succeeds", async () => {
    server.script({ status: 429, headers: { "retry-after": "1" }, json: { error: { message: "Rate limit reached" } } }, completion("after the wait"));
    const retries: RetryInfo[] = [];
    const c = await ask(client({ retryBaseDelayMs: 1, onRetry: (r) => retries.push(r) }));
    expect(c.text).toBe("after the wait");
    expect(c.attempts).toBe(2);
    expect(server.requests).toHaveLength(2);
    // Retry-After: 1 → the second request came no sooner than a second after the first.
    expect(server.requests[1].receivedAtMs - server.requests[0].receivedAtMs).toBeGreaterThanOrEqual(950);
    expect(retries).toEqual([{ attempt: 1, delayMs: 1000, reason: "HTTP 429: Rate limit reached" }]);
  });

  it("retries 5xx with jittered backoff, then succeeds", async () => {
    server.script({ status: 500, body: "boom" }, { status: 503, json: { error: { message: "overloaded" } } }, completion("third time"));
    const retries: RetryInfo[] = [];
    const c = await ask(client({ retryBaseDelayMs: 40, onRetry: (r) => retries.push(r) }));
    expect(c).toMatchObject({ text: "third time", attempts: 3 });
    expect(retries.map((r) => r.reason)).toEqual(["HTTP 500: boom", "HTTP 503: overloaded"]);
    // Full jitter: each wait is in [0, base × 2^(n-1)].
    expect(retries[0].delayMs).toBeLessThanOrEqual(40);
    expect(retries[1].delayMs).toBeLessThanOrEqual(80);
  });

  it("gives up after max_retries with UNAVAILABLE (5xx) and RESOURCE_EXHAUSTED (429)", async () => {
    server.respond = () => ({ status: 502, body: "bad gateway" });
    const unavailable = await failure(ask(client({ maxRetries: 2 })));
    expect(unavailable).toBeInstanceOf(ModelUnavailableError);
    expect(unavailable.code).toBe(status.UNAVAILABLE);
    expect(unavailable.attempts).toBe(3);
    expect(unavailable.message).toBe(`${server.baseUrl}/chat/completions: HTTP 502: bad gateway (after 3 attempts)`);
    expect(server.requests).toHaveLength(3);

    server.reset();
    server.respond = () => ({ status: 429, headers: { "retry-after": "0" }, json: { error: { message: "slow down" } } });
    const limited = await failure(ask(client({ maxRetries: 1 })));
    expect(limited).toBeInstanceOf(ModelRateLimitedError);
    expect(limited.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(limited.message).toContain("HTTP 429: slow down (after 2 attempts)");
    expect(server.requests).toHaveLength(2);
  });

  it("does not wait for a Retry-After longer than a minute", async () => {
    server.script({ status: 429, headers: { "retry-after": "600" } });
    const err = await failure(ask(client()));
    expect(err).toBeInstanceOf(ModelRateLimitedError);
    expect(err.message).toContain("asked to retry after 600s, longer than contextd waits (60s)");
    expect(server.requests).toHaveLength(1);
  });

  it("does not retry a 4xx, and never puts the key in a message", async () => {
    server.script({ status: 400, json: { error: { message: `context too long; you sent Authorization: Bearer ${KEY}` } } });
    const bad = await failure(ask(client()));
    expect(bad).toBeInstanceOf(ModelRejectedError);
    expect(bad.code).toBe(status.INVALID_ARGUMENT);
    expect(bad.message).toContain("HTTP 400: context too long; you sent Authorization: Bearer ***");
    expect(bad.message).not.toContain(KEY);
    expect(server.requests).toHaveLength(1);

    server.reset();
    server.script({ status: 401, json: { error: { message: "Incorrect API key provided" } } });
    const denied = await failure(ask(client()));
    expect(denied.code).toBe(status.FAILED_PRECONDITION);
    expect(denied.httpStatus).toBe(401);
    expect(server.requests).toHaveLength(1);
  });

  it("refuses malformed JSON and answers without choices or content, without retrying", async () => {
    server.script({ body: "<html>proxy error</html>" });
    const malformed = await failure(ask(client()));
    expect(malformed).toBeInstanceOf(ModelResponseError);
    expect(malformed.code).toBe(status.UNKNOWN);
    expect(malformed.message).toContain("HTTP 200 with malformed JSON: <html>proxy error</html>");

    server.script({ json: { id: "x", choices: [] } });
    expect((await failure(ask(client()))).message).toContain("the response has no choices");
    server.script({ json: { choices: [{ message: { role: "assistant", content: null }, finish_reason: "length" }] } });
    expect((await failure(ask(client()))).message).toContain("choices[0].message has no content (finish_reason length)");
    server.script({ json: { choices: [{ message: { role: "assistant", content: "", refusal: "I can't help with that" } }] } });
    expect((await failure(ask(client()))).message).toContain("the model refused: I can't help with that");
    expect(server.requests).toHaveLength(4);
  });

  it("times out a hung request (DEADLINE_EXCEEDED), does not retry it, and closes the connection", async () => {
    server.script(HANG);
    const started = Date.now();
    const err = await failure(ask(client({ timeoutMs: 300 })));
    expect(err).toBeInstanceOf(ModelTimeoutError);
    expect(err.code).toBe(status.DEADLINE_EXCEEDED);
    expect(err.message).toBe(`${server.baseUrl}/chat/completions: no answer within 300ms`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await server.waitForAbort(0);
    expect(server.requests).toHaveLength(1);
  });

  it("aborts the request in flight when the caller's signal fires", async () => {
    server.script(HANG);
    const controller = new AbortController();
    const call = ask(client({ timeoutMs: 60_000 }), controller.signal);
    await server.waitFor((r) => r.length === 1);
    controller.abort(new Error("runtime went away"));
    await expect(call).rejects.toMatchObject({ name: "AbortError" });
    const req = await server.waitForAbort(0);
    expect(req.abortedAtMs! - req.receivedAtMs).toBeLessThan(5_000);
  });

  it("abandons a pending retry at once when the caller's signal fires", async () => {
    server.script({ status: 429, headers: { "retry-after": "30" } });
    const controller = new AbortController();
    let waiting!: () => void;
    const inRetryWait = new Promise<void>((resolve) => (waiting = resolve));
    const call = ask(client({ onRetry: () => waiting() }), controller.signal);
    await inRetryWait;
    const abortedAt = Date.now();
    controller.abort();
    await expect(call).rejects.toMatchObject({ name: "AbortError" });
    expect(Date.now() - abortedAt).toBeLessThan(1_000);
    expect(server.requests).toHaveLength(1);
  });

  it("retries network errors and then reports them as UNAVAILABLE", async () => {
    const gone = await startChatServer();
    const baseUrl = gone.baseUrl;
    await gone.close();
    const err = await failure(
      new ChatCompletionsClient({ baseUrl, model: "m", apiKey: KEY, timeoutMs: 2_000, maxRetries: 1, retryBaseDelayMs: 1 }).complete({
        messages: [{ role: "user", content: "x" }],
      }),
    );
    expect(err).toBeInstanceOf(ModelUnavailableError);
    expect(err.message).toMatch(/network error: .*ECONNREFUSED.*\(after 2 attempts\)$/);
  });

  it("reads Retry-After as seconds, an HTTP date, or retry-after-ms", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(retryAfter(new Headers({ "retry-after": "2" }), now)).toBe(2000);
    expect(retryAfter(new Headers({ "retry-after": "Wed, 01 Jan 2025 00:00:05 GMT" }), now)).toBe(5000);
    expect(retryAfter(new Headers({ "retry-after-ms": "250", "retry-after": "9" }), now)).toBe(250);
    expect(retryAfter(new Headers({ "retry-after": "soon" }), now)).toBeUndefined();
    expect(retryAfter(new Headers(), now)).toBeUndefined();
  });
});
