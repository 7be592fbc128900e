/**
 * A client for any OpenAI-compatible chat-completions endpoint (`POST {base_url}/chat/completions`:
 * OpenAI, Azure-style proxies, vLLM, llama.cpp, Ollama, LiteLLM ...), on Node's global fetch.
 * Used by the `openai` summarizer and by HostService.Complete.
 *
 * - One non-streaming request per call; the bearer key is read by the caller from the environment
 *   (never from the config file) and only ever sent in the Authorization header.
 * - Per-request `timeoutMs`. A timeout is final, not retried: a model that did not answer in time
 *   rarely answers the same prompt faster on a second try, and retrying would spend the caller's
 *   deadline before the summarizer could fall back to extractive.
 * - 429, 408, 5xx and network errors are retried up to `maxRetries` times, with exponential backoff
 *   and full jitter (a random wait in [0, base × 2^n], capped), or exactly as long as the server's
 *   Retry-After / retry-after-ms says; a Retry-After longer than MAX_RETRY_AFTER_MS gives up at once
 *   rather than hold a compaction for minutes.
 * - The caller's AbortSignal aborts the request in flight and any pending retry wait at once; the
 *   call then rejects with an AbortError (never a ModelError), so a cancelled compaction does not
 *   fall back but stops.
 * - Failures are typed (model-errors.ts); messages name the endpoint (without credentials), the
 *   HTTP status, the attempts and a short excerpt of what the server said, scrubbed of the key.
 */
import {
  abortError,
  ModelRateLimitedError,
  ModelRejectedError,
  ModelResponseError,
  ModelTimeoutError,
  ModelUnavailableError,
  type ModelError,
  type ModelFailure,
} from "./model-errors.js";

export interface ChatCompletionsOptions {
  /** e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  baseUrl: string;
  model: string;
  /** Sent as `Authorization: Bearer <apiKey>`; no header when undefined. */
  apiKey?: string;
  /** Per HTTP request (each retry has its own). */
  timeoutMs: number;
  /** Retries after the first attempt (0: one attempt only). */
  maxRetries: number;
  /** Upper bound of the first retry's jittered wait; doubles with each retry (capped at RETRY_DELAY_CAP_MS). */
  retryBaseDelayMs: number;
  /** The request field that carries the output limit: `max_tokens` (most servers) or `max_completion_tokens` (OpenAI's reasoning models). */
  maxTokensParam?: "max_tokens" | "max_completion_tokens";
  /** Sent only when set (some models refuse any temperature). */
  temperature?: number;
  /** Told about every retry before its wait (for a warning in the log). */
  onRetry?: (info: RetryInfo) => void;
}

export interface RetryInfo {
  /** The attempt that failed (1 = the first). */
  attempt: number;
  delayMs: number;
  reason: string;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface ChatRequest {
  messages: ChatMessage[];
  /** The output limit for this call; omitted from the request when undefined. */
  maxTokens?: number;
  signal?: AbortSignal;
}

export interface ChatUsage {
  input: number;
  output: number;
  total: number;
}

export interface ChatCompletion {
  text: string;
  /** `stop`, `length` (cut at the output limit), ... as the server said; "" when it did not. */
  finishReason: string;
  /** The model the server says answered (may differ from the one asked, e.g. a dated snapshot). */
  model: string;
  usage: ChatUsage;
  /** HTTP attempts this call took (1 when the first succeeded). */
  attempts: number;
}

/** The longest jittered backoff wait. */
export const RETRY_DELAY_CAP_MS = 30_000;
/** A Retry-After longer than this is not waited for: the call fails at once. */
export const MAX_RETRY_AFTER_MS = 60_000;
/** Responses larger than this are refused (a summary or a completion is a few KiB). */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** How much of a server's error text goes into a message. */
const EXCERPT_CHARS = 300;

/** One failed attempt, before deciding whether to retry it. */
interface Failure {
  /** What an HTTP exchange can end in (a spend limit is decided before any request: model-spend.ts). */
  failure: Exclude<ModelFailure, "spend_limited">;
  /** What went wrong, for the message (already scrubbed). */
  why: string;
  httpStatus?: number;
  retryAfterMs?: number;
}

export class ChatCompletionsClient {
  /** The endpoint as it may appear in messages and logs: no credentials, no query. */
  readonly endpoint: string;
  private readonly url: string;

  constructor(private readonly options: ChatCompletionsOptions) {
    this.url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`;
    const shown = new URL(this.url);
    shown.username = "";
    shown.password = "";
    shown.search = "";
    this.endpoint = shown.toString();
  }

  get model(): string {
    return this.options.model;
  }

  /** One completion, retried as described above; rejects with a ModelError or an AbortError. */
  async complete(req: ChatRequest): Promise<ChatCompletion> {
    const { signal } = req;
    const o = this.options;
    const payload: Record<string, unknown> = { model: o.model, messages: req.messages, stream: false };
    if (req.maxTokens !== undefined) payload[o.maxTokensParam ?? "max_tokens"] = Math.max(1, Math.floor(req.maxTokens));
    if (o.temperature !== undefined) payload.temperature = o.temperature;
    const body = JSON.stringify(payload);

    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw abortError(signal, "chat completion");
      const outcome = await this.attempt(body, signal);
      if (!("failure" in outcome)) return { ...outcome, attempts: attempt };
      const retryable = outcome.failure === "rate_limited" || outcome.failure === "unavailable";
      if (!retryable || attempt > o.maxRetries) throw this.error(outcome, attempt);
      if (outcome.retryAfterMs !== undefined && outcome.retryAfterMs > MAX_RETRY_AFTER_MS) {
        throw this.error(
          {
            ...outcome,
            why: `${outcome.why}; the server asked to retry after ${seconds(outcome.retryAfterMs)}, longer than contextd waits (${seconds(MAX_RETRY_AFTER_MS)})`,
          },
          attempt,
        );
      }
      const delayMs = outcome.retryAfterMs ?? Math.random() * Math.min(RETRY_DELAY_CAP_MS, o.retryBaseDelayMs * 2 ** (attempt - 1));
      o.onRetry?.({ attempt, delayMs: Math.round(delayMs), reason: outcome.why });
      await sleep(delayMs, signal);
    }
  }

  private async attempt(body: string, signal: AbortSignal | undefined): Promise<Omit<ChatCompletion, "attempts"> | Failure> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json", "user-agent": "contextd" };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    let status = 0;
    let text: string;
    let retryAfterMs: number | undefined;
    try {
      const res = await fetch(this.url, { method: "POST", headers, body, signal: both });
      status = res.status;
      retryAfterMs = retryAfter(res.headers);
      text = await readBody(res, MAX_RESPONSE_BYTES);
    } catch (err) {
      // The caller's cancellation wins over everything: no fallback, no retry.
      if (signal?.aborted) throw abortError(signal, "chat completion");
      if (timeout.aborted) return { failure: "timeout", why: `no answer within ${seconds(this.options.timeoutMs)}` };
      if (err instanceof BodyTooLargeError) return { failure: "bad_response", why: err.message, httpStatus: status };
      return { failure: "unavailable", why: `network error: ${this.scrub(networkReason(err))}` };
    }

    if (status === 429) return { failure: "rate_limited", why: `HTTP 429${this.serverSaid(text)}`, httpStatus: status, retryAfterMs };
    if (status === 408 || status >= 500) return { failure: "unavailable", why: `HTTP ${status}${this.serverSaid(text)}`, httpStatus: status, retryAfterMs };
    if (status < 200 || status >= 300) return { failure: "rejected", why: `HTTP ${status}${this.serverSaid(text)}`, httpStatus: status };

    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { failure: "bad_response", why: `HTTP ${status} with malformed JSON: ${this.excerpt(text) || "(empty body)"}`, httpStatus: status };
    }
    return this.parse(json, status);
  }

  private parse(json: unknown, status: number): Omit<ChatCompletion, "attempts"> | Failure {
    const bad = (why: string): Failure => ({ failure: "bad_response", why: `HTTP ${status}: ${why}`, httpStatus: status });
    if (!isObject(json)) return bad(`the body is not a JSON object: ${this.excerpt(JSON.stringify(json))}`);
    const choices = json.choices;
    if (!Array.isArray(choices) || choices.length === 0) {
      const err = isObject(json.error) && typeof json.error.message === "string" ? `: the server said ${this.excerpt(json.error.message)}` : "";
      return bad(`the response has no choices${err}`);
    }
    const choice: unknown = choices[0];
    const message = isObject(choice) && isObject(choice.message) ? choice.message : undefined;
    const finishReason = isObject(choice) && typeof choice.finish_reason === "string" ? choice.finish_reason : "";
    const content = message?.content;
    let text = "";
    if (typeof content === "string") text = content;
    // Some servers answer content as a list of parts, as in requests.
    else if (Array.isArray(content)) text = content.map((p) => (isObject(p) && typeof p.text === "string" ? p.text : "")).join("");
    if (!text.trim()) {
      if (typeof message?.refusal === "string" && message.refusal) return bad(`the model refused: ${this.excerpt(message.refusal)}`);
      return bad(`choices[0].message has no content${finishReason ? ` (finish_reason ${finishReason})` : ""}`);
    }
    const usage = isObject(json.usage) ? json.usage : {};
    const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
    const input = n(usage.prompt_tokens);
    const output = n(usage.completion_tokens);
    return {
      text,
      finishReason,
      model: typeof json.model === "string" && json.model ? json.model : this.options.model,
      usage: { input, output, total: n(usage.total_tokens) || input + output },
    };
  }

  private error(f: Failure, attempts: number): ModelError {
    const message = `${this.endpoint}: ${f.why}${attempts > 1 ? ` (after ${attempts} attempts)` : ""}`;
    switch (f.failure) {
      case "rejected":
        return new ModelRejectedError(message, attempts, f.httpStatus ?? 400);
      case "rate_limited":
        return new ModelRateLimitedError(message, attempts);
      case "unavailable":
        return new ModelUnavailableError(message, attempts, f.httpStatus);
      case "timeout":
        return new ModelTimeoutError(message, attempts);
      case "bad_response":
        return new ModelResponseError(message, attempts, f.httpStatus ?? 200);
    }
  }

  /** `: <the server's error message>` from an error body (OpenAI's `{error: {message}}` or plain text). */
  private serverSaid(text: string): string {
    let said = text;
    try {
      const json: unknown = JSON.parse(text);
      if (isObject(json) && isObject(json.error) && typeof json.error.message === "string") said = json.error.message;
      else if (isObject(json) && typeof json.error === "string") said = json.error;
      else if (isObject(json) && typeof json.message === "string") said = json.message;
      else if (isObject(json) && typeof json.detail === "string") said = json.detail;
      else if (isObject(json) && Object.keys(json).length === 0) said = "";
    } catch {
      // not JSON: the text itself
    }
    const excerpt = this.excerpt(said);
    return excerpt ? `: ${excerpt}` : "";
  }

  private excerpt(text: string): string {
    const line = this.scrub(text).replace(/\s+/g, " ").trim();
    return line.length > EXCERPT_CHARS ? `${line.slice(0, EXCERPT_CHARS - 1)}…` : line;
  }

  /** Whatever the server or the network stack said, without the key (servers do echo requests). */
  private scrub(text: string): string {
    const key = this.options.apiKey;
    return key && key.length >= 4 ? text.split(key).join("***") : text;
  }
}

class BodyTooLargeError extends Error {}

async function readBody(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(`HTTP ${res.status} with a response larger than ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Retry-After (seconds or an HTTP date) or OpenAI's retry-after-ms, in ms; undefined when absent or unreadable. */
export function retryAfter(headers: Headers, now = Date.now()): number | undefined {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Math.max(0, Number(ms));
  const value = headers.get("retry-after");
  if (value === null) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.max(0, Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** ECONNREFUSED, ECONNRESET, ENOTFOUND ... from undici's `fetch failed` and its cause. */
function networkReason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  const code = typeof cause?.code === "string" ? cause.code : "";
  const detail = typeof cause?.message === "string" && cause.message ? cause.message : err.message;
  return code && !detail.includes(code) ? `${code} ${detail}` : detail;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal, "chat completion"));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!, "chat completion"));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : ms > 1000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms)}ms`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
