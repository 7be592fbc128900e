import type { LanguageModelV3Message, LanguageModelV3Prompt, SharedV3ProviderOptions } from "@ai-sdk/provider";

/**
 * Prompt-cache breakpoints in the AI SDK's own terms: provider options on the prompt's messages,
 * which each provider package turns into its API's cache marker.
 *
 * - `anthropic` (`@ai-sdk/anthropic`, and Anthropic models behind `@ai-sdk/google-vertex` /
 *   the gateway): `providerOptions.anthropic.cacheControl = { type: "ephemeral" }` — `cache_control`
 *   on the message's last content block; the provider allows at most four per request.
 * - `bedrock` (`@ai-sdk/amazon-bedrock`): `providerOptions.bedrock.cachePoint = { type: "default" }` —
 *   a cache point after the message.
 * - `openaiCompatible` (`@ai-sdk/openai-compatible`): `providerOptions.openaiCompatible`'s fields are
 *   copied into the request's message (or content part) as they are, so `cache_control: { type:
 *   "ephemeral" }` reaches servers that read Anthropic-style markers there (OpenRouter, LiteLLM and
 *   other proxies in front of Anthropic models). Opt-in: a strict server (OpenAI's own API) refuses a
 *   field it does not know.
 *
 * OpenAI and Gemini cache the longest identical prefix on their own and take no marker.
 */
export type CacheBreakpointProvider = "anthropic" | "bedrock" | "openaiCompatible";

export interface CacheBreakpointOptions {
  /** Whose markers are placed. Default `["anthropic", "bedrock"]` (each read only by its own provider). */
  providers?: readonly CacheBreakpointProvider[];
  /** Anthropic's cache lifetime: `"5m"` (Anthropic's default, when not given) or `"1h"`. */
  anthropicTtl?: "5m" | "1h";
}

export const DEFAULT_CACHE_BREAKPOINT_PROVIDERS: readonly CacheBreakpointProvider[] = ["anthropic", "bedrock"];

type ProviderOptions = SharedV3ProviderOptions;
type Json = Record<string, unknown>;

/** The marker fields of each provider, in its providerOptions namespace. */
const MARKER_KEY: Record<CacheBreakpointProvider, string> = { anthropic: "cacheControl", bedrock: "cachePoint", openaiCompatible: "cache_control" };

function markerValue(provider: CacheBreakpointProvider, options: CacheBreakpointOptions): Json {
  if (provider === "bedrock") return { type: "default" };
  if (provider === "anthropic" && options.anthropicTtl) return { type: "ephemeral", ttl: options.anthropicTtl };
  return { type: "ephemeral" };
}

/** `providerOptions` without the markers of `providers` (undefined when nothing is left). */
function unmarked(po: ProviderOptions | undefined, providers: readonly CacheBreakpointProvider[]): ProviderOptions | undefined {
  if (!po) return undefined;
  let out: ProviderOptions | undefined;
  for (const p of providers) {
    const ns = po[p] as Json | undefined;
    if (!ns || !(MARKER_KEY[p] in ns)) continue;
    out ??= { ...po };
    const { [MARKER_KEY[p]]: _gone, ...rest } = ns;
    if (Object.keys(rest).length) out[p] = rest as ProviderOptions[string];
    else delete out[p];
  }
  if (!out) return po;
  return Object.keys(out).length ? out : undefined;
}

function withMarker(po: ProviderOptions | undefined, provider: CacheBreakpointProvider, options: CacheBreakpointOptions): ProviderOptions {
  return { ...po, [provider]: { ...(po?.[provider] as Json | undefined), [MARKER_KEY[provider]]: markerValue(provider, options) } as ProviderOptions[string] };
}

/** A message (and its parts) without the markers of `providers`: a copy, the input untouched. */
function strip(m: LanguageModelV3Message, providers: readonly CacheBreakpointProvider[]): LanguageModelV3Message {
  const setOptions = <T extends { providerOptions?: ProviderOptions }>(x: T): T => {
    const po = unmarked(x.providerOptions, providers);
    if (po === x.providerOptions) return x;
    const { providerOptions: _old, ...rest } = x;
    return (po ? { ...rest, providerOptions: po } : rest) as T;
  };
  if (m.role === "system") return setOptions(m);
  return setOptions({ ...m, content: m.content.map((part) => setOptions(part)) } as LanguageModelV3Message);
}

/**
 * Where a provider reads a message's marker. Anthropic and Bedrock read the message's own options
 * (Anthropic puts them on its last content block). `@ai-sdk/openai-compatible` copies a system or
 * assistant message's options into the message, but a user message's only from its parts (a lone
 * text part becomes the message) and a tool message's only from each result: the marker goes on the
 * last part there.
 */
function mark(m: LanguageModelV3Message, provider: CacheBreakpointProvider, options: CacheBreakpointOptions): LanguageModelV3Message {
  const onPart = provider === "openaiCompatible" && (m.role === "user" || m.role === "tool") && m.content.length > 0;
  if (!onPart) return { ...m, providerOptions: withMarker(m.providerOptions, provider, options) };
  // Tool-approval responses are not sent to the model: the marker goes on the last result.
  let at = m.content.length - 1;
  if (m.role === "tool") while (at > 0 && m.content[at].type !== "tool-result") at--;
  const content = m.content.map((part, i) => (i === at ? { ...part, providerOptions: withMarker(part.providerOptions, provider, options) } : part));
  return { ...m, content } as LanguageModelV3Message;
}

/**
 * The prompt with cache breakpoints for `providers`: on the last message of the leading system
 * messages (the runtime's system prompt, with contextd's addition), and on the last message of the
 * stable prefix (`stableMessages` leading messages of `prompt`, identical to the previous call's).
 * Markers the application put on its messages are removed first: contextd may have moved or
 * summarized the messages they were on, and a provider allows only a few (Anthropic: four).
 */
export function placeCacheBreakpoints(prompt: LanguageModelV3Prompt, stableMessages: number, options: CacheBreakpointOptions = {}): LanguageModelV3Prompt {
  const providers = options.providers ?? DEFAULT_CACHE_BREAKPOINT_PROVIDERS;
  const out = prompt.map((m) => strip(m, providers));
  let system = 0;
  while (system < out.length && out[system].role === "system") system++;
  const at = new Set<number>();
  if (system > 0) at.add(system - 1);
  const stable = Math.min(stableMessages, out.length);
  if (stable > 0) at.add(stable - 1);
  for (const i of at) for (const p of providers) out[i] = mark(out[i], p, options);
  return out;
}
