import { FailedPreconditionError } from "../../contract/errors.js";
import { ChatCompletionsClient } from "../../llm/chat-completions.js";
import { createExtractiveSummarizer } from "./extractive.js";
import { createOpenAISummarizer } from "./openai-summarizer.js";
import type { Summarizer, TextSummarizer } from "./summarizer.js";
import { OPENAI_DEFAULTS, type OpenAISummarizerConfig, type SpendLimitConfig, type SummarizerConfig } from "./summarizer-config.js";
import { ModelSpend, type SpendLimits } from "../../llm/model-spend.js";

export { OPENAI_DEFAULTS, type OpenAISummarizerConfig, type SummarizerConfig } from "./summarizer-config.js";

/** The configured chat model: one client shared by the summarizer and HostService.Complete. */
export interface ChatModel {
  client: ChatCompletionsClient;
  contextWindowTokens: number;
  maxOutputTokens: number;
  /** The per-request timeout, for start-up checks against the engine deadlines. */
  timeoutMs: number;
  /** Each agent's spend on this model (`limits`), checked and counted by every caller of `client`. */
  spend: ModelSpend;
}

export interface SummarizerDeps {
  /** Where the API key is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Counts prompt tokens for chunking (default: about 4 characters per token). */
  countTokens?: (text: string) => number;
  /** Retries and fallbacks are warnings. */
  log?: { warn(obj: object, msg: string): void };
  /** A model already built by createChatModel, to share its client; built here when absent. */
  model?: ChatModel;
  /** The extractive summarizer to use (or fall back to): default inline, on the event loop (ExtractiveThread runs it beside). */
  extractive?: TextSummarizer;
}

/** The chat model behind an `openai` summarizer; undefined for `extractive` (no model configured). */
export function createChatModel(config: SummarizerConfig, deps: SummarizerDeps = {}): ChatModel | undefined {
  if (config.kind !== "openai") return undefined;
  const env = deps.env ?? process.env;
  // loadConfig already refuses a missing variable; this guards other callers (tests, the bench).
  const apiKey = env[config.api_key_env];
  if (!apiKey) throw new FailedPreconditionError(`compaction.summarizer.api_key_env: environment variable ${config.api_key_env} is not set`);
  const d = OPENAI_DEFAULTS;
  const client = new ChatCompletionsClient({
    baseUrl: config.base_url,
    model: config.model,
    apiKey,
    timeoutMs: config.timeout ?? d.timeout,
    maxRetries: config.max_retries ?? d.max_retries,
    retryBaseDelayMs: config.retry_base_delay ?? d.retry_base_delay,
    maxTokensParam: config.max_tokens_param ?? d.max_tokens_param,
    temperature: config.temperature,
    onRetry:
      deps.log &&
      ((r) =>
        deps.log!.warn(
          { endpoint: client.endpoint, model: config.model, attempt: r.attempt, retry_in_ms: r.delayMs, reason: r.reason },
          "chat completion failed; retrying",
        )),
  });
  return {
    client,
    contextWindowTokens: config.context_window_tokens ?? d.context_window_tokens,
    maxOutputTokens: config.max_output_tokens ?? d.max_output_tokens,
    timeoutMs: config.timeout ?? d.timeout,
    spend: new ModelSpend(spendLimits(config)),
  };
}

/** `limits` as ModelSpend takes it. */
export function spendLimits(config: OpenAISummarizerConfig): SpendLimits {
  const limit = (l: SpendLimitConfig | undefined) => ({ callsPerHour: l?.calls_per_hour ?? 0, tokensPerHour: l?.tokens_per_hour ?? 0 });
  return {
    default: limit(config.limits),
    agents: new Map(Object.entries(config.limits?.agents ?? {}).map(([agent, l]) => [agent, limit(l)])),
  };
}

/** The configured summarizer: `extractive` (deterministic, offline) or `openai` (a model, extractive as its fallback). */
export function createSummarizer(config: SummarizerConfig, deps: SummarizerDeps = {}): Summarizer {
  if (config.kind === "extractive") return deps.extractive ?? createExtractiveSummarizer();
  const model = deps.model ?? createChatModel(config, deps)!;
  return createOpenAISummarizer({
    client: model.client,
    contextWindowTokens: model.contextWindowTokens,
    maxOutputTokens: model.maxOutputTokens,
    countTokens: deps.countTokens ?? ((text) => Math.ceil(text.length / 4)),
    spend: model.spend,
    fallback: deps.extractive,
    onFallback:
      deps.log &&
      ((reason) =>
        deps.log!.warn({ endpoint: model.client.endpoint, model: config.model, reason }, "summarizer model failed; compacting with the extractive summarizer")),
  });
}
