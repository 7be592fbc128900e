/**
 * `compaction.summarizer` as loadConfig yields it, and what its unset keys mean. Kept apart from the
 * summarizers so the config schema can use it without loading them.
 */

/** `compaction.summarizer` kind openai, as loadConfig yields it (durations in ms; unset keys take OPENAI_DEFAULTS). */
export interface OpenAISummarizerConfig {
  kind: "openai";
  /** e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`. */
  base_url: string;
  model: string;
  /** The environment variable holding the API key (never the key itself). */
  api_key_env: string;
  timeout?: number;
  max_retries?: number;
  retry_base_delay?: number;
  context_window_tokens?: number;
  max_output_tokens?: number;
  max_tokens_param?: "max_tokens" | "max_completion_tokens";
  temperature?: number;
  /** What each agent may spend on the model per hour (unset or 0: no limit), `agents` by agent id. */
  limits?: SpendLimitConfig & { agents?: Record<string, SpendLimitConfig> };
}

/** One agent's hour of the model: requests and tokens (input + output); 0 or unset is no limit. */
export interface SpendLimitConfig {
  calls_per_hour?: number;
  tokens_per_hour?: number;
}

export type SummarizerConfig = { kind: "extractive" } | OpenAISummarizerConfig;

/**
 * What an unset key of the openai summarizer means (documented in config/contextd.yaml and
 * docs/configuration.md, `compaction.summarizer`).
 */
export const OPENAI_DEFAULTS = {
  timeout: 60_000,
  max_retries: 3,
  retry_base_delay: 500,
  context_window_tokens: 32_000,
  max_output_tokens: 4096,
  max_tokens_param: "max_tokens",
} as const satisfies Partial<OpenAISummarizerConfig>;
