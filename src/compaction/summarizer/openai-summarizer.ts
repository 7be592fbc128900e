/**
 * The `openai` summarizer: the structured summary prompt (summary-prompt.ts) sent to an
 * OpenAI-compatible chat-completions endpoint (chat-completions.ts).
 *
 * - **Chunked**: the history is rendered as transcript lines and packed into chunks that fit the
 *   model's window (`contextWindowTokens` minus the output limit, the prompt and room for the
 *   running summary, with a safety margin because the model's tokenizer is not ours). Chunks go
 *   one after another, oldest first, each request carrying the summary so far as its
 *   <previous-summary>; the last answer is the summary. A single message larger than a chunk is
 *   cut to its head and tail.
 * - **Falls back** to the extractive summarizer when the model fails after its retries (a
 *   ModelError: 4xx, 429, 5xx, network, timeout, malformed or empty answer, or one that holds
 *   nothing of what it summarizes — compaction/summary-content.ts). The answer's details
 *   then say `summarizer: extractive`, `summarizer_fallback_from: openai` and why. Once the model
 *   has failed in a compaction, the compaction's later summarize calls fall back at once
 *   (`priorAttempt`) instead of waiting for the model again.
 * - **Short summaries** (a cap under COMPACT_BELOW_CHARS, 360 characters: a tight budget) are the
 *   extractive summarizer's compact form, without asking the model (`summarizer_model_skipped`).
 * - **Cancellation is not a failure**: when the caller's signal aborts, the request and any retry
 *   wait stop at once and the AbortError propagates; nothing falls back.
 */
import type { TextSummarizer, SummarizeInput, Summarizer, SummaryDetails, SummaryResult } from "./summarizer.js";
import { capChars } from "../summary-fit.js";
import { carriesContent } from "../summary-content.js";
import type { ChatCompletionsClient } from "../../llm/chat-completions.js";
import { createExtractiveSummarizer, DEFAULT_MAX_CHARS } from "./extractive.js";
import { COMPACT_BELOW_CHARS } from "./extract-format.js";
import { clipHeadTail } from "./extract-text.js";
import { isAbortError, ModelError, ModelResponseError } from "../../llm/model-errors.js";
import { ModelSpendLimitedError, type ModelSpend } from "../../llm/model-spend.js";
import { cleanSummary, renderMessage, SUMMARY_SYSTEM_PROMPT, summaryInstructions, summaryPrompt } from "./summary-prompt.js";

export const OPENAI_KIND = "openai";

export interface OpenAISummarizerOptions {
  client: ChatCompletionsClient;
  /** The model's context window, prompt and answer together. */
  contextWindowTokens: number;
  /** The most the model may write per request (also bounded by what maxChars needs). */
  maxOutputTokens: number;
  /** Counts tokens of prompt text (the host's tokenizer; the model's own is unknown). */
  countTokens: (text: string) => number;
  /** Each agent's hour of the model: checked before every request, charged after (model-spend.ts). */
  spend?: ModelSpend;
  /** Used when the model fails; default the extractive summarizer. */
  fallback?: TextSummarizer;
  /** Told about every fallback (for a warning in the log). */
  onFallback?: (reason: string) => void;
}

/** Share of the window used for the prompt and answer: our token counts are not the model's. */
const WINDOW_SAFETY = 0.85;
/** Per-message framing of the chat format, and the blank lines between transcript lines. */
const FRAMING_TOKENS = 32;
/** A chunk never gets less room than this, even when the window is too small for the summary. */
export const MIN_CHUNK_TOKENS = 256;
/** Characters per token assumed for a summary not yet written (prose; conservative). */
const SUMMARY_CHARS_PER_TOKEN = 3;

export function createOpenAISummarizer(options: OpenAISummarizerOptions): Summarizer {
  const fallback = options.fallback ?? createExtractiveSummarizer();
  const { client } = options;

  const fallBack = async (input: SummarizeInput, reason: string, extra: SummaryDetails, fresh = true): Promise<SummaryResult> => {
    if (fresh) options.onFallback?.(reason);
    const summary = await fallback.summarize(input);
    return {
      summary,
      details: {
        summarizer: fallback.kind,
        summarizer_fallback_from: OPENAI_KIND,
        summarizer_fallback_reason: reason,
        summarizer_model: client.model,
        ...extra,
      },
    };
  };

  return {
    kind: OPENAI_KIND,
    async summarize(input: SummarizeInput): Promise<SummaryResult> {
      // A summary this short (a tight budget) is the extractive compact form: the identifiers and
      // the latest request, verbatim. A model asked for a few words would spend a request to write
      // what its cap then cuts short.
      if (Number.isFinite(input.maxChars) && input.maxChars < COMPACT_BELOW_CHARS) {
        return {
          summary: await fallback.summarize(input),
          details: { summarizer: fallback.kind, summarizer_model: client.model, summarizer_requests: 0, summarizer_model_skipped: true },
        };
      }
      const prior = input.priorAttempt;
      if (prior?.summarizer_fallback_from === OPENAI_KIND) {
        // The same failure explains this summary too (and the requests it took are still all there were).
        return fallBack(
          input,
          String(prior.summarizer_fallback_reason ?? "the model failed"),
          {
            summarizer_requests: Number(prior.summarizer_requests ?? 0),
            summarizer_model_skipped: true,
            ...(prior.summarizer_spend_limited ? { summarizer_spend_limited: true } : {}),
          },
          false,
        );
      }
      const progress = { requests: 0 };
      try {
        return await summarizeWithModel(input, options, progress);
      } catch (err) {
        if (isAbortError(err) || input.signal?.aborted || !(err instanceof ModelError)) throw err;
        return fallBack(input, err.message, {
          summarizer_requests: progress.requests + err.attempts,
          ...(err instanceof ModelSpendLimitedError ? { summarizer_spend_limited: true } : {}),
        });
      }
    },
  };
}

async function summarizeWithModel(input: SummarizeInput, o: OpenAISummarizerOptions, progress: { requests: number }): Promise<SummaryResult> {
  const maxChars = Number.isFinite(input.maxChars) ? Math.max(0, Math.floor(input.maxChars)) : DEFAULT_MAX_CHARS;
  const previous = (input.previousSummary ?? "").trim();
  // Enough output for maxChars of prose, never more than configured.
  const maxTokens = Math.max(1, Math.min(o.maxOutputTokens, Math.ceil(maxChars / SUMMARY_CHARS_PER_TOKEN) + 256));
  const chunks = chunkHistory(input, o, maxChars, maxTokens, previous);
  if (chunks.length === 0)
    return { summary: "", details: { summarizer: OPENAI_KIND, summarizer_model: o.client.model, summarizer_requests: 0, summarizer_chunks: 0 } };

  let running = previous;
  let inputTokens = 0;
  let outputTokens = 0;
  let finishReason = "";
  let model = o.client.model;
  for (let i = 0; i < chunks.length; i++) {
    const instructions = summaryInstructions({
      update: running !== "",
      maxChars,
      customInstructions: input.customInstructions,
      part: chunks.length > 1 ? { index: i + 1, count: chunks.length } : undefined,
    });
    const request = {
      messages: [
        { role: "system" as const, content: SUMMARY_SYSTEM_PROMPT },
        { role: "user" as const, content: summaryPrompt(chunks[i], running, instructions) },
      ],
      maxTokens,
      signal: input.signal,
    };
    // Checked before each request: a compaction of many chunks stops at the limit, not after it.
    o.spend?.check(input.agentId ?? "", "summary");
    const completion = await (input.away ? input.away(() => o.client.complete(request)) : o.client.complete(request));
    o.spend?.record(input.agentId ?? "", "summary", completion.attempts, completion.usage.input + completion.usage.output);
    progress.requests += completion.attempts;
    inputTokens += completion.usage.input;
    outputTokens += completion.usage.output;
    finishReason = completion.finishReason;
    model = completion.model;
    const text = cleanSummary(completion.text);
    if (!text) {
      throw new ModelResponseError(`${o.client.endpoint}: the answer holds no summary once its reasoning block is removed`, completion.attempts, 200);
    }
    // The running summary is held to the cap, so the next chunk's prompt stays within its budget.
    running = capChars(text, maxChars);
  }
  // An answer that holds nothing of what it summarizes (boilerplate, a refusal, a cap that cut it to
  // nothing) is no summary: the extractive one is written instead.
  if (!(await carriesContent(running, previous, input.messages))) {
    throw new ModelResponseError(`${o.client.endpoint}: the answer holds nothing of the conversation it was to summarize`, 1, 200);
  }
  return {
    summary: running,
    details: {
      summarizer: OPENAI_KIND,
      summarizer_model: model,
      summarizer_requests: progress.requests,
      summarizer_chunks: chunks.length,
      summarizer_input_tokens: inputTokens,
      summarizer_output_tokens: outputTokens,
      summarizer_finish_reason: finishReason,
    },
  };
}

/**
 * The history as transcript chunks, each within the tokens a request has left for it; [] when
 * there is nothing to summarize (no message with text and no previous summary).
 */
function chunkHistory(input: SummarizeInput, o: OpenAISummarizerOptions, maxChars: number, maxTokens: number, previous: string): string[] {
  const lines = input.messages.map(renderMessage).filter((l) => l !== "");
  if (lines.length === 0) return previous ? ["(no new messages: rewrite the previous summary within the limit)"] : [];

  const overhead =
    o.countTokens(SUMMARY_SYSTEM_PROMPT) +
    o.countTokens(summaryInstructions({ update: true, maxChars, customInstructions: input.customInstructions, part: { index: 99, count: 99 } })) +
    o.countTokens(summaryPrompt("", "x", "")) +
    FRAMING_TOKENS;
  const summaryRoom = Math.max(o.countTokens(previous), Math.ceil(maxChars / SUMMARY_CHARS_PER_TOKEN));
  const budget = Math.max(MIN_CHUNK_TOKENS, Math.floor(o.contextWindowTokens * WINDOW_SAFETY) - maxTokens - overhead - summaryRoom);

  const chunks: string[] = [];
  let current: string[] = [];
  let used = 0;
  for (const raw of lines) {
    let line = raw;
    let tokens = o.countTokens(line) + 2;
    // One message larger than a chunk: keep its head and tail (shrunk until it fits, bounded).
    for (let i = 0; i < 4 && tokens > budget; i++) {
      line = clipHeadTail(line, Math.max(64, Math.floor((line.length * budget * 0.9) / tokens)));
      tokens = o.countTokens(line) + 2;
    }
    if (used + tokens > budget && current.length > 0) {
      chunks.push(current.join("\n\n"));
      current = [];
      used = 0;
    }
    current.push(line);
    used += tokens;
  }
  if (current.length > 0) chunks.push(current.join("\n\n"));
  return chunks;
}
