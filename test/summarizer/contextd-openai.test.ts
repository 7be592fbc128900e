/**
 * The `openai` summarizer and HostService.Complete through a real contextd process, against a
 * chat-completions server started by the test (chat-server.ts).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type * as H from "../../src/contract/gen/contextd/v1/host.js";
import { CompactionTarget } from "../../src/contract/gen/contextd/v1/types.js";
import { SUMMARY_METADATA_KEY } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { ConfigError, loadConfig } from "../../src/server/config.js";
import { PLANTED_FACTS } from "../fixtures/coding-session.js";
import { assistant, system, textOf, user } from "../fixtures/messages.js";
import { runContextdUntilExit, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { completion, HANG, promptOf, startChatServer, type ChatServer } from "./chat-server.js";
import { completeCaller, type CompleteCaller } from "./complete-caller.js";

const KEY = "sk-contextd-test-9f8e7d6c5b4a";
const MODEL_TIMEOUT_MS = 3_000;

function shortHistory(turns = 40) {
  const p = PLANTED_FACTS;
  const messages = [
    user(`${p.functionName}() in ${p.filePath} throws "${p.errorMessage}" (ticket ${p.ticket}, runbook ${p.url}). ${p.constraint}`),
    assistant(`I will start from ${p.filePath} and keep the payments API unchanged.`),
  ];
  for (let i = 1; i <= turns; i++) {
    messages.push(
      user(
        `Step ${i}: check the ledger batch ${1000 + i} and tell me whether its totals match the invoice export for region ${i % 7}; list any mismatch you find with the entry ids and the amounts involved.`,
      ),
    );
    messages.push(
      assistant(
        `Batch ${1000 + i} checked: the totals match the export for region ${i % 7} except entry L-${i * 17} (expected 1${i}.00 EUR, found 1${i}.50 EUR), which I flagged for review in the reconciliation report.`,
      ),
    );
  }
  return messages;
}

function summarizerConfig(baseUrl: string, more: Record<string, unknown> = {}) {
  return {
    kind: "openai",
    base_url: baseUrl,
    model: "contextd-test-model",
    api_key_env: "TEST_SUMMARIZER_KEY",
    timeout: `${MODEL_TIMEOUT_MS}ms`,
    max_retries: 2,
    retry_base_delay: "1ms",
    ...more,
  };
}

describe("contextd with the openai summarizer", () => {
  let server: ChatServer;
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let sessions = 0;

  beforeAll(async () => {
    server = await startChatServer();
    contextd = await startContextd({
      config: {
        compaction: { keep_recent_tokens: 2_000, summary_max_chars: 3_000, summarizer: summarizerConfig(server.baseUrl) },
        slots: { agents: { "engine-agent": "complete-engine" } },
        engines: { timeouts: { assemble: "60s" } },
      },
      env: { TEST_SUMMARIZER_KEY: KEY },
    });
    cx = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    await server?.close();
  });
  beforeEach(() => server.reset());

  /** A fresh session holding ~9k tokens of history: the planted facts first, then 40 short turns (one chunk for the model). */
  async function filledSession(): Promise<{ sessionId: string }> {
    const session = { sessionId: `openai-${++sessions}` };
    await cx.appendMessages({ session, messages: shortHistory() });
    return session;
  }
  const compact = (session: { sessionId: string }, signal?: AbortSignal) =>
    cx.compact({ session, tokenBudget: 200_000, compactionTarget: CompactionTarget.COMPACTION_TARGET_THRESHOLD }, { signal, timeoutMs: 60_000 });
  async function compactionEntries(session: { sessionId: string }) {
    const t = await cx.getTranscript({ session, pageSize: 1000 });
    return t.entries.flatMap((e) => (e.entry?.$case === "compaction" ? [e.entry.value] : []));
  }

  it("compacts with the model's summary, and the compaction entry says openai ran", async () => {
    const session = await filledSession();
    server.respond = () => completion(`## Goal\n- Fix ${PLANTED_FACTS.functionName} in ${PLANTED_FACTS.filePath}`);
    const res = await compact(session);
    expect(res.compacted).toBe(true);
    expect(res.engineId).toBe("legacy");
    expect(res.result!.summary).toBe(`## Goal\n- Fix ${PLANTED_FACTS.functionName} in ${PLANTED_FACTS.filePath}`);
    expect(res.result!.details).toMatchObject({
      summarizer: "openai",
      summarizer_model: "test-model-2024",
      summarizer_requests: 1,
      summarizer_chunks: 1,
      summarizer_input_tokens: 120,
      summarizer_output_tokens: 30,
    });
    const [entry] = await compactionEntries(session);
    expect(entry.summary).toBe(res.result!.summary);
    expect(entry.details).toEqual(res.result!.details);

    const [req] = server.requests;
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.body!.model).toBe("contextd-test-model");
    expect(promptOf(req)).toContain(PLANTED_FACTS.errorMessage);

    // The next compaction folds the model's summary in as the previous summary.
    await cx.appendMessages({ session, messages: shortHistory(30).slice(2) });
    server.respond = () => completion("## Goal\n- second summary");
    const again = await compact(session);
    expect(again.result!.details).toMatchObject({ summarizer: "openai" });
    expect(promptOf(server.requests[1])).toContain(`<previous-summary>\n${res.result!.summary}\n</previous-summary>`);
  });

  it("never shows the model a system message of the transcript: they stay verbatim at the head of the view", async () => {
    const session = { sessionId: `openai-${++sessions}` };
    const start = "SYSTEM-START: you are the payments assistant; never print card numbers.";
    const middle = "SYSTEM-MIDDLE: from now on answer in French.";
    const history = shortHistory();
    await cx.appendMessages({ session, messages: [system(start), ...history.slice(0, 40), system(middle), ...history.slice(40)] });
    server.respond = () => completion("## Goal\n- reconcile the ledger batches");
    for (let round = 0; round < 2; round++) {
      const res = await compact(session);
      expect(res.compacted).toBe(true);
      expect(res.result!.summary).not.toContain("SYSTEM-");
      await cx.appendMessages({ session, messages: shortHistory(20).slice(2) });
    }
    expect(server.requests.length).toBeGreaterThanOrEqual(2);
    for (const req of server.requests) expect(req.rawBody).not.toMatch(/SYSTEM-(START|MIDDLE)/);
    const ctx = await cx.assemble({ session, tokenBudget: 200_000, autoCompact: false });
    expect(ctx.messages.slice(0, 2).map(textOf)).toEqual([start, middle]);
    expect(ctx.messages[2].metadata[SUMMARY_METADATA_KEY]).toBe("compaction_summary");
  });

  it("retries a 429 and a 500, then uses the model's summary", async () => {
    const session = await filledSession();
    server.script({ status: 429, headers: { "retry-after": "0" } }, { status: 500, body: "try again" });
    const written = `## Goal\n- ${PLANTED_FACTS.ticket}, written after two retries`;
    server.respond = () => completion(written);
    const res = await compact(session);
    expect(res.result!.summary).toBe(written);
    expect(res.result!.details).toMatchObject({ summarizer: "openai", summarizer_requests: 3 });
    expect(server.requests).toHaveLength(3);
  });

  it("falls back to extractive when the retries are spent, and the details say why", async () => {
    const session = await filledSession();
    server.respond = () => ({ status: 500, json: { error: { message: "the model is down" } } });
    const res = await compact(session);
    expect(res.compacted).toBe(true);
    expect(res.result!.details).toMatchObject({
      summarizer: "extractive",
      summarizer_fallback_from: "openai",
      summarizer_fallback_reason: `${server.baseUrl}/chat/completions: HTTP 500: the model is down (after 3 attempts)`,
      summarizer_requests: 3,
    });
    // The extractive summary keeps the planted identifiers verbatim.
    expect(res.result!.summary).toContain(PLANTED_FACTS.filePath);
    expect(res.result!.summary).toContain(PLANTED_FACTS.ticket);
    const [entry] = await compactionEntries(session);
    expect(entry.details).toMatchObject({ summarizer: "extractive", summarizer_fallback_from: "openai" });
    const warning = await contextd.waitForLog((l) => l.msg === "summarizer model failed; compacting with the extractive summarizer");
    expect(warning.reason).toBe(res.result!.details!.summarizer_fallback_reason);
    expect(contextd.logs()).not.toContain(KEY);
  });

  it("falls back when the model does not answer within the timeout (not retried)", async () => {
    const session = await filledSession();
    server.respond = () => HANG;
    const res = await compact(session);
    expect(res.result!.details).toMatchObject({
      summarizer: "extractive",
      summarizer_fallback_reason: `${server.baseUrl}/chat/completions: no answer within ${MODEL_TIMEOUT_MS / 1000}s`,
    });
    await server.waitForAbort(0);
    expect(server.requests).toHaveLength(1);
  });

  it("a cancelled Compact aborts the model request and commits nothing", async () => {
    const session = await filledSession();
    server.respond = () => HANG;
    const controller = new AbortController();
    const call = compact(session, controller.signal);
    await server.waitFor((r) => r.length === 1);
    controller.abort();
    await expect(call).rejects.toMatchObject({ code: status.CANCELLED });
    const req = await server.waitForAbort(0);
    // Aborted by the cancellation, well before the model's own timeout could have closed it.
    expect(req.abortedAtMs! - req.receivedAtMs).toBeLessThan(MODEL_TIMEOUT_MS - 1_000);
    expect(await compactionEntries(session)).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  describe("HostService.Complete, called by a sidecar engine during its call", () => {
    let caller: CompleteCaller;
    const session = { sessionId: "complete-session", agentId: "engine-agent" };

    beforeAll(async () => {
      caller = await completeCaller(contextd, cx, session, "complete-engine");
    });
    afterAll(() => caller?.close());

    const complete = (req: H.DeepPartial<H.CompleteRequest>, timeoutMs?: number) => caller.complete(req, timeoutMs);
    const refused = (req: H.DeepPartial<H.CompleteRequest>, timeoutMs?: number) =>
      complete(req, timeoutMs).done.then(
        () => Promise.reject(new Error("expected an error")),
        (e: ServiceError) => e,
      );

    it("answers with the model's text and usage, sending the system prompt and messages", async () => {
      server.script(completion("42.", { prompt_tokens: 17, completion_tokens: 2, total_tokens: 19 }));
      const res = await complete({ system: "Answer with a number.", messages: [user("What is 6 × 7?"), assistant("Let me compute.")], maxTokens: 50 }).done;
      expect(res.text).toBe("42.");
      expect(res.usage).toMatchObject({ input: 17, output: 2, total: 19 });
      const [req] = server.requests;
      expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(req.body).toMatchObject({
        model: "contextd-test-model",
        max_tokens: 50,
        messages: [
          { role: "system", content: "Answer with a number." },
          { role: "user", content: "What is 6 × 7?" },
          { role: "assistant", content: "Let me compute." },
        ],
      });
    });

    it("maps upstream failures to gRPC statuses without leaking the key", async () => {
      server.respond = () => ({ status: 503, json: { error: { message: "overloaded" } } });
      const unavailable = await refused({ system: "s" });
      expect(unavailable.code).toBe(status.UNAVAILABLE);
      expect(unavailable.details).toBe(`${server.baseUrl}/chat/completions: HTTP 503: overloaded (after 3 attempts)`);

      server.reset();
      server.respond = () => ({ status: 429, headers: { "retry-after": "0" } });
      expect((await refused({ system: "s" })).code).toBe(status.RESOURCE_EXHAUSTED);

      server.script({ status: 400, json: { error: { message: `prompt too long (key ${KEY})` } } });
      const invalid = await refused({ system: "s" });
      expect(invalid.code).toBe(status.INVALID_ARGUMENT);
      expect(invalid.details).toContain("prompt too long (key ***)");
      expect(invalid.details).not.toContain(KEY);

      server.script({ body: "{not json" });
      const unknown = await refused({ system: "s" });
      expect(unknown.code).toBe(status.UNKNOWN);
      expect(unknown.details).toContain("malformed JSON");

      server.script(HANG);
      const timedOut = await refused({ system: "s" });
      expect(timedOut.code).toBe(status.DEADLINE_EXCEEDED);
      expect(timedOut.details).toContain(`no answer within ${MODEL_TIMEOUT_MS / 1000}s`);

      expect((await refused({})).code).toBe(status.INVALID_ARGUMENT);
    });

    it("honours the call's deadline and cancellation: the model request is aborted", async () => {
      server.respond = () => HANG;
      const late = await refused({ system: "s" }, 500);
      expect(late.code).toBe(status.DEADLINE_EXCEEDED);
      const first = await server.waitForAbort(0);
      expect(first.abortedAtMs! - first.receivedAtMs).toBeLessThan(MODEL_TIMEOUT_MS - 1_000);

      const call = complete({ system: "s" });
      await server.waitFor((r) => r.length === 2);
      call.cancel();
      await expect(call.done).rejects.toMatchObject({ code: status.CANCELLED });
      const second = await server.waitForAbort(1);
      expect(second.abortedAtMs! - second.receivedAtMs).toBeLessThan(MODEL_TIMEOUT_MS - 1_000);
      expect(server.requests).toHaveLength(2);
    });
  });
});

describe("openai summarizer configuration errors", () => {
  it("a missing API key variable stops contextd with one line naming the key", async () => {
    const run = await runContextdUntilExit({
      config: { compaction: { summarizer: summarizerConfig("http://127.0.0.1:9/v1", { api_key_env: "SUMMARIZER_KEY_NOT_SET" }) } },
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("contextd: config: compaction.summarizer.api_key_env: environment variable SUMMARIZER_KEY_NOT_SET is not set\n");
  });

  it("bad values are refused with the key and the reason; env overrides reach every key", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-openai-config-"));
    const load = (more: Record<string, unknown>, env: Record<string, string> = {}) => {
      const file = path.join(dir, "contextd.yaml");
      fs.writeFileSync(file, stringify({ compaction: { summarizer: summarizerConfig("http://127.0.0.1:9/v1", more) } }));
      return loadConfig({ file, env: { TEST_SUMMARIZER_KEY: KEY, ...env } });
    };
    const problem = (more: Record<string, unknown>) => {
      try {
        load(more);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error("expected a ConfigError");
    };
    expect(problem({ max_output_tokens: 3_000, context_window_tokens: 4_096 })).toBe(
      "config: compaction.summarizer.max_output_tokens: max_output_tokens (3000) must be at most half of context_window_tokens (4096), to leave room for the history",
    );
    expect(problem({ context_window_tokens: 1_000 })).toBe(
      "config: compaction.summarizer.context_window_tokens: 1000 is too small for a summary prompt (at least 2048)",
    );
    expect(problem({ timeout: 30 })).toBe("config: compaction.summarizer.timeout: 30 is not a duration (use 500ms, 2s, 3m)");
    expect(problem({ max_retries: -1 })).toBe("config: compaction.summarizer.max_retries: expected a non-negative integer, got -1");
    expect(problem({ max_retries: 50 })).toBe("config: compaction.summarizer.max_retries: 50 is too many (at most 10)");
    expect(problem({ temperature: 3 })).toBe("config: compaction.summarizer.temperature: expected a number from 0 to 2, got 3");
    expect(problem({ max_tokens_param: "max_output" })).toBe(
      'config: compaction.summarizer.max_tokens_param: "max_output" is not one of max_tokens, max_completion_tokens',
    );
    expect(problem({ api_key: "sk-plain" })).toBe(
      'config: unknown key "compaction.summarizer.api_key" (no plain-text secrets: use token_env / token_sha256, or api_key_env)',
    );

    const cfg = load(
      { timeout: null, max_tokens_param: "max_completion_tokens" },
      { CONTEXTD_COMPACTION__SUMMARIZER__TIMEOUT: "5s", CONTEXTD_COMPACTION__SUMMARIZER__CONTEXT_WINDOW_TOKENS: "128000" },
    );
    expect(cfg.compaction.summarizer).toEqual({
      kind: "openai",
      base_url: "http://127.0.0.1:9/v1",
      model: "contextd-test-model",
      api_key_env: "TEST_SUMMARIZER_KEY",
      timeout: 5_000,
      max_retries: 2,
      retry_base_delay: 1,
      context_window_tokens: 128_000,
      max_tokens_param: "max_completion_tokens",
    });
  });
});
