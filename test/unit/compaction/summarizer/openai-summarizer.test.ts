import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CompactionTarget, type Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { compactNative } from "../../../../src/compaction/native-compaction.js";
import { ChatCompletionsClient, type ChatCompletionsOptions } from "../../../../src/llm/chat-completions.js";
import { createChatModel, createSummarizer } from "../../../../src/compaction/summarizer/create-summarizer.js";
import { summarizeExtractive } from "../../../../src/compaction/summarizer/extractive.js";
import { createOpenAISummarizer, type OpenAISummarizerOptions } from "../../../../src/compaction/summarizer/openai-summarizer.js";
import { asSummaryResult, type SummarizeInput } from "../../../../src/compaction/summarizer/summarizer.js";
import { SUMMARY_SYSTEM_PROMPT } from "../../../../src/compaction/summarizer/summary-prompt.js";
import { createTokenizer } from "../../../../src/tokens/create-tokenizer.js";
import { codingSession, PLANTED_FACTS } from "../../../fixtures/coding-session.js";
import { assistant, toolCall, toolResult, user } from "../../../fixtures/messages.js";
import { completion, HANG, promptOf, startChatServer, type ChatServer, type RecordedRequest } from "../../../summarizer/chat-server.js";

const tokenizer = createTokenizer("o200k_base");
const countTokens = (t: string) => tokenizer.countText(t);

/** Messages as the host stores them: an entry id and a token count each. */
function stored(messages: Message[]): Message[] {
  return messages.map((m, i) => ({ ...m, id: `e${i + 1}`, tokenCount: tokenizer.countMessage(m) }));
}

/** The text between <tag> and </tag> in a prompt, or undefined. */
function tagged(prompt: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>\\n([\\s\\S]*?)\\n</${tag}>`).exec(prompt);
  return m?.[1];
}

describe("the openai summarizer against a chat-completions server", () => {
  let server: ChatServer;
  beforeAll(async () => {
    server = await startChatServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => server.reset());

  const summarizer = (o: Partial<OpenAISummarizerOptions> = {}, c: Partial<ChatCompletionsOptions> = {}) =>
    createOpenAISummarizer({
      client: new ChatCompletionsClient({
        baseUrl: server.baseUrl,
        model: "test-model",
        apiKey: "k-123456",
        timeoutMs: 5_000,
        maxRetries: 2,
        retryBaseDelayMs: 1,
        ...c,
      }),
      contextWindowTokens: 32_000,
      maxOutputTokens: 4096,
      countTokens,
      ...o,
    });
  const history = stored([
    user("Fix the failing test in src/app.ts; never touch the public API of parseConfig()."),
    assistant("Let me read it.", [toolCall("c1", "read_file", { path: "src/app.ts" })]),
    toolResult("c1", "read_file", "export function parseConfig() { throw new Error('ENOENT: config.yaml') }"),
    assistant("The test fails with ENOENT: config.yaml; I will add a default."),
  ]);
  const input = (over: Partial<SummarizeInput> = {}): SummarizeInput => ({ previousSummary: "", messages: history, maxChars: 4000, ...over });

  it("sends the structured prompt with the transcript, the previous summary, the focus and the cap", async () => {
    server.script(completion("<think>planning the summary</think>\n## Goal\n- Fix the failing test in src/app.ts"));
    const out = asSummaryResult(
      await summarizer().summarize(input({ previousSummary: "## Goal\n- Earlier: set up the repo", customInstructions: "focus on the config loader" })),
    );
    expect(out.summary).toBe("## Goal\n- Fix the failing test in src/app.ts");
    expect(out.details).toEqual({
      summarizer: "openai",
      summarizer_model: "test-model-2024",
      summarizer_requests: 1,
      summarizer_chunks: 1,
      summarizer_input_tokens: 120,
      summarizer_output_tokens: 30,
      summarizer_finish_reason: "stop",
    });
    const [req] = server.requests;
    expect(req.body!.model).toBe("test-model");
    expect(req.body!.messages[0]).toEqual({ role: "system", content: SUMMARY_SYSTEM_PROMPT });
    const prompt = promptOf(req);
    expect(tagged(prompt, "previous-summary")).toBe("## Goal\n- Earlier: set up the repo");
    expect(tagged(prompt, "conversation")).toBe(
      [
        "[User]: Fix the failing test in src/app.ts; never touch the public API of parseConfig().",
        '[Assistant]: Let me read it.\n[Assistant tool calls]: read_file({"path":"src/app.ts"})',
        "[Tool result read_file]: export function parseConfig() { throw new Error('ENOENT: config.yaml') }",
        "[Assistant]: The test fails with ENOENT: config.yaml; I will add a default.",
      ].join("\n\n"),
    );
    for (const heading of [
      "## Goal",
      "## Constraints & Preferences",
      "### Done",
      "### In Progress",
      "### Blocked",
      "## Key Decisions",
      "## Next Steps",
      "## Critical Context",
      "## Identifiers",
    ]) {
      expect(prompt).toContain(heading);
    }
    expect(prompt).toContain("Update that summary");
    expect(prompt).toContain("at most 4000 characters");
    expect(prompt).toContain("Additional focus for this summary (from the runtime): focus on the config loader");
    expect(prompt).toMatch(/Copy identifiers exactly/);
    // The output limit follows the cap: 4000 chars ≈ 1334 tokens + slack, under max_output_tokens.
    expect(req.body!.max_tokens).toBe(1590);
  });

  it("holds the summary to maxChars even when the model writes more", async () => {
    server.script(completion("parseConfig ".repeat(100)));
    const out = asSummaryResult(await summarizer().summarize(input({ maxChars: 400 })));
    expect(out.summary).toBe("parseConfig ".repeat(100).slice(0, 400));
  });

  it("writes a summary shorter than 360 characters (a tight budget) as the extractive compact form, without asking the model", async () => {
    const out = asSummaryResult(await summarizer().summarize(input({ maxChars: 120 })));
    expect(server.requests).toHaveLength(0);
    expect(out.details).toMatchObject({ summarizer: "extractive", summarizer_model_skipped: true, summarizer_requests: 0 });
    expect(out.summary.length).toBeLessThanOrEqual(120);
    expect(out.summary).toMatch(/^Ids: .*src\/app\.ts/);
  });

  it("summarizes a history larger than the window chunk by chunk, carrying the running summary forward", async () => {
    const long = stored(codingSession({ turns: 30 }).messages);
    const historyTokens = long.reduce((n, m) => n + m.tokenCount, 0);
    expect(historyTokens).toBeGreaterThan(15_000);
    server.respond = (req) => completion(`## Goal\n- running summary after part ${req.index + 1}\n## Identifiers\n- ${PLANTED_FACTS.filePath}`);
    const window = 4096;
    const out = asSummaryResult(
      await summarizer({ contextWindowTokens: window, maxOutputTokens: 512 }).summarize({ previousSummary: "", messages: long, maxChars: 1500 }),
    );

    const reqs: RecordedRequest[] = server.requests;
    expect(reqs.length).toBeGreaterThanOrEqual(4);
    expect(out.details).toMatchObject({ summarizer: "openai", summarizer_chunks: reqs.length, summarizer_requests: reqs.length });
    expect(out.summary).toBe(`## Goal\n- running summary after part ${reqs.length}\n## Identifiers\n- ${PLANTED_FACTS.filePath}`);
    // The first part has no previous summary; every later one carries the answer to the one before.
    expect(tagged(promptOf(reqs[0]), "previous-summary")).toBeUndefined();
    for (let i = 1; i < reqs.length; i++) {
      expect(tagged(promptOf(reqs[i]), "previous-summary")).toBe(`## Goal\n- running summary after part ${i}\n## Identifiers\n- ${PLANTED_FACTS.filePath}`);
      expect(promptOf(reqs[i])).toContain(`this is part ${i + 1} of ${reqs.length}`);
    }
    // Each request fits the window with room for the answer.
    for (const r of reqs) {
      const tokens = r.body!.messages.reduce((n, m) => n + countTokens(m.content), 0);
      expect(tokens + r.body!.max_tokens!).toBeLessThanOrEqual(window);
    }
    // Together the parts carry the whole history: the first request and the last turn are in it.
    const sent = reqs.map((r) => tagged(promptOf(r), "conversation")!).join("\n\n");
    expect(sent).toContain(PLANTED_FACTS.errorMessage);
    expect(sent).toContain(PLANTED_FACTS.ticket);
  });

  it("falls back to the extractive summary when the model keeps failing, and says why", async () => {
    server.respond = () => ({ status: 500, json: { error: { message: "model crashed" } } });
    const fallbacks: string[] = [];
    const out = asSummaryResult(await summarizer({ onFallback: (r) => fallbacks.push(r) }).summarize(input()));
    expect(out.summary).toBe(summarizeExtractive(input()));
    expect(out.details).toEqual({
      summarizer: "extractive",
      summarizer_fallback_from: "openai",
      summarizer_fallback_reason: `${server.baseUrl}/chat/completions: HTTP 500: model crashed (after 3 attempts)`,
      summarizer_model: "test-model",
      summarizer_requests: 3,
    });
    expect(fallbacks).toEqual([out.details!.summarizer_fallback_reason]);
    expect(server.requests).toHaveLength(3);
  });

  it("falls back on malformed JSON and on an answer that is only a reasoning block", async () => {
    server.script({ body: "not json" });
    const malformed = asSummaryResult(await summarizer().summarize(input()));
    expect(malformed.details).toMatchObject({ summarizer: "extractive", summarizer_fallback_reason: expect.stringContaining("malformed JSON: not json") });
    server.script(completion("<think>only thoughts</think>"));
    const empty = asSummaryResult(await summarizer().summarize(input()));
    expect(empty.details).toMatchObject({
      summarizer: "extractive",
      summarizer_fallback_reason: expect.stringContaining("no summary once its reasoning block is removed"),
    });
  });

  it("does not ask the model again once it failed earlier in the same compaction", async () => {
    const out = asSummaryResult(
      await summarizer().summarize(
        input({ priorAttempt: { summarizer: "extractive", summarizer_fallback_from: "openai", summarizer_fallback_reason: "HTTP 503" } }),
      ),
    );
    expect(out.details).toMatchObject({
      summarizer: "extractive",
      summarizer_fallback_reason: "HTTP 503",
      summarizer_requests: 0,
      summarizer_model_skipped: true,
    });
    expect(server.requests).toHaveLength(0);
  });

  it("stops without falling back when the caller aborts", async () => {
    server.script(HANG);
    const controller = new AbortController();
    const call = summarizer({}, { timeoutMs: 60_000 }).summarize(input({ signal: controller.signal }));
    await server.waitFor((r) => r.length === 1);
    controller.abort();
    await expect(call).rejects.toMatchObject({ name: "AbortError" });
    await server.waitForAbort(0);
    expect(server.requests).toHaveLength(1);
  });

  it("through native compaction: the compaction details say which summarizer ran", async () => {
    const messages = stored(codingSession({ turns: 12 }).messages);
    const run = (s: ReturnType<typeof summarizer>) =>
      compactNative(
        { messages, tokenBudget: 6_000, target: CompactionTarget.COMPACTION_TARGET_THRESHOLD, force: false },
        { summarizer: s, tokenizer, settings: { reserveTokens: 0, keepRecentTokens: 2_000, summaryMaxChars: 3_000 } },
      );
    server.respond = () => completion("## Goal\n- Fix the reconciler in src/billing/invoice_reconciler.ts");
    const ok = await run(summarizer());
    expect(ok.result!.summary).toBe("## Goal\n- Fix the reconciler in src/billing/invoice_reconciler.ts");
    expect(ok.result!.details).toMatchObject({
      summarizer: "openai",
      summarizer_model: "test-model-2024",
      summarizer_requests: server.requests.length,
      summarizer_chunks: server.requests.length,
      cut: "turn",
      iterations: 1,
    });

    server.reset();
    server.respond = () => HANG;
    const fell = await run(summarizer({}, { timeoutMs: 200 }));
    expect(fell.result!.details).toMatchObject({
      summarizer: "extractive",
      summarizer_fallback_from: "openai",
      summarizer_fallback_reason: `${server.baseUrl}/chat/completions: no answer within 200ms`,
    });
    expect(fell.result!.summary).toContain(PLANTED_FACTS.filePath);
    expect(server.requests).toHaveLength(1);
  });

  it("BUDGET compactions that summarize several times ask the model only until it fails", async () => {
    const messages = stored(codingSession({ turns: 20 }).messages);
    server.respond = () => ({ status: 503 });
    const out = await compactNative(
      // A budget this tight takes two summaries: once the first one's real size is known the cut
      // moves (native-compaction.ts), and the part before it is summarized again.
      { messages, tokenBudget: 1_500, target: CompactionTarget.COMPACTION_TARGET_BUDGET, force: false },
      { summarizer: summarizer(), tokenizer, settings: { reserveTokens: 0, keepRecentTokens: 20_000, summaryMaxChars: 2_000 } },
    );
    expect(out.compacted).toBe(true);
    expect(out.result!.details).toMatchObject({
      summarizer: "extractive",
      iterations: 2,
      summarizer_fallback_reason: `${server.baseUrl}/chat/completions: HTTP 503 (after 3 attempts)`,
      summarizer_requests: 3,
      summarizer_model_skipped: true,
    });
    // One failed attempt with its retries; the later summaries did not wait for the model again.
    expect(server.requests).toHaveLength(3);
  });

  it("createSummarizer builds it from the config, reading the key from the named variable", async () => {
    const config = {
      kind: "openai" as const,
      base_url: `${server.baseUrl}/`,
      model: "cfg-model",
      api_key_env: "TEST_SUMMARY_KEY",
      max_retries: 0,
      timeout: 2_000,
    };
    expect(() => createChatModel(config, { env: {} })).toThrow("compaction.summarizer.api_key_env: environment variable TEST_SUMMARY_KEY is not set");
    const s = createSummarizer(config, { env: { TEST_SUMMARY_KEY: "from-env-456" }, countTokens });
    expect(s.kind).toBe("openai");
    server.script(completion("## Goal\n- configured: fix parseConfig()"));
    expect(asSummaryResult(await s.summarize(input())).summary).toBe("## Goal\n- configured: fix parseConfig()");
    expect(server.requests[0].path).toBe("/v1/chat/completions");
    expect(server.requests[0].headers.authorization).toBe("Bearer from-env-456");
    expect(server.requests[0].body!.model).toBe("cfg-model");
    expect(createSummarizer({ kind: "extractive" }).kind).toBe("extractive");
  });
});
