/**
 * How much of a prompt a provider's prompt cache can serve, and what the input then costs.
 *
 * Providers cache the longest prompt prefix byte-identical to an earlier request's. A runtime on
 * contextd sends, per model call, the answer of one Assemble: `system_prompt_addition` (which the
 * runtime puts *before* its own system prompt, so any change there misses the whole cache) and then
 * the messages. So the part of a call that can be served from the cache is the system prompt
 * addition, if unchanged, plus the leading messages identical to the previous call's — compared as
 * the provider sees a message (role, content, tool call id and name, error flag), not by ids or
 * token counts contextd adds.
 *
 * Prices, as fractions of the uncached input price (published, 2026):
 * - Anthropic: a cache read 0.1×, a cache write 1.25× (the runtime marks the end of the prompt as a
 *   breakpoint, so every token past the reused prefix is written);
 * - OpenAI: cached input 0.1×, no write premium; caching is automatic for prompts of 1,024 tokens or
 *   more, and a cached prefix counts in steps of 128 tokens.
 * Both assume the calls come within the cache's lifetime (5 minutes; an agent loop's calls do).
 */
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import type { Tokenizer } from "../../src/tokens/tokenizer.js";

/** One model call's prompt: what the runtime sends, in order. */
export interface Prompt {
  systemPromptAddition: string;
  messages: Message[];
}

/** One call measured against the previous one. */
export interface CallReuse {
  /** Tokens of the whole prompt (system prompt addition + messages). */
  total: number;
  /** Tokens of its leading part identical to the previous call's (0 on the first call). */
  reused: number;
  /** Messages of that part. */
  reusedMessages: number;
}

export const ANTHROPIC = { read: 0.1, write: 1.25 } as const;
export const OPENAI = { read: 0.1, minimumPrompt: 1024, step: 128 } as const;

/** A message as the provider sees it: what must be byte-identical for the cache to hit. */
function providerView(m: Message): string {
  return JSON.stringify([m.role, m.content, m.toolCallId, m.toolName, m.isError]);
}

/** Measures a sequence of prompts, each against the one before. */
export class PrefixMeter {
  private previous: { addition: string; views: string[] } | undefined;
  readonly calls: CallReuse[] = [];

  constructor(private readonly tokenizer: Tokenizer) {}

  add(prompt: Prompt): CallReuse {
    const views = prompt.messages.map(providerView);
    const tokens = prompt.messages.map((m) => this.tokenizer.countMessage(m));
    const additionTokens = prompt.systemPromptAddition ? this.tokenizer.countText(prompt.systemPromptAddition) : 0;
    const total = additionTokens + tokens.reduce((a, b) => a + b, 0);
    let reused = 0;
    let reusedMessages = 0;
    const prev = this.previous;
    if (prev && prev.addition === prompt.systemPromptAddition) {
      reused = additionTokens;
      for (; reusedMessages < views.length && reusedMessages < prev.views.length && views[reusedMessages] === prev.views[reusedMessages]; reusedMessages++)
        reused += tokens[reusedMessages];
    }
    this.previous = { addition: prompt.systemPromptAddition, views };
    const call = { total, reused, reusedMessages };
    this.calls.push(call);
    return call;
  }
}

/** Reused tokens over all prompt tokens. */
export function prefixReuse(calls: readonly CallReuse[]): number {
  const total = calls.reduce((a, c) => a + c.total, 0);
  return total ? calls.reduce((a, c) => a + c.reused, 0) / total : Number.NaN;
}

/** Input cost with Anthropic's cache over the cost without caching. */
export function anthropicCostRatio(calls: readonly CallReuse[]): number {
  const total = calls.reduce((a, c) => a + c.total, 0);
  const cost = calls.reduce((a, c) => a + c.reused * ANTHROPIC.read + (c.total - c.reused) * ANTHROPIC.write, 0);
  return total ? cost / total : Number.NaN;
}

/** Input cost with OpenAI's automatic caching over the cost without caching. */
export function openaiCostRatio(calls: readonly CallReuse[]): number {
  const total = calls.reduce((a, c) => a + c.total, 0);
  const cost = calls.reduce((a, c) => {
    const cached = c.total >= OPENAI.minimumPrompt && c.reused >= OPENAI.minimumPrompt ? Math.floor(c.reused / OPENAI.step) * OPENAI.step : 0;
    return a + cached * OPENAI.read + (c.total - cached);
  }, 0);
  return total ? cost / total : Number.NaN;
}
