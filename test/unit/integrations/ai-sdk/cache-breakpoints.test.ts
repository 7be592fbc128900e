import type { LanguageModelV3Prompt } from "@ai-sdk/provider";
import { placeCacheBreakpoints, promptCacheOf } from "@contextd/ai-sdk";
import { PromptCacheRetention } from "contextd/client";
import { describe, expect, it } from "vitest";

const ephemeral = { type: "ephemeral" };

const prompt = (): LanguageModelV3Prompt => [
  { role: "system", content: "You read files." },
  { role: "user", content: [{ type: "text", text: "Read a and b." }] },
  { role: "assistant", content: [{ type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "a" } }] },
  {
    role: "tool",
    content: [
      { type: "tool-result", toolCallId: "c1", toolName: "read", output: { type: "text", value: "a" } },
      { type: "tool-approval-response", approvalId: "x", approved: true },
    ],
  },
  {
    role: "user",
    content: [
      { type: "text", text: "Now b." },
      { type: "text", text: "Thanks." },
    ],
  },
];

describe("placeCacheBreakpoints", () => {
  it("marks the system prompt and the last stable message for Anthropic and Bedrock on the message, and leaves the input untouched", () => {
    const input = prompt();
    const before = JSON.stringify(input);
    const out = placeCacheBreakpoints(input, 3);
    expect(JSON.stringify(input)).toBe(before);
    expect(out.map((m) => m.providerOptions ?? null)).toEqual([
      { anthropic: { cacheControl: ephemeral }, bedrock: { cachePoint: { type: "default" } } },
      null,
      { anthropic: { cacheControl: ephemeral }, bedrock: { cachePoint: { type: "default" } } },
      null,
      null,
    ]);
  });

  it("puts the openaiCompatible marker where @ai-sdk/openai-compatible reads it: a tool message's last result, a user message's last part", () => {
    const tool = placeCacheBreakpoints(prompt(), 4, { providers: ["openaiCompatible"] })[3];
    expect(tool.providerOptions).toBeUndefined();
    expect(tool.role === "tool" && tool.content.map((p) => p.providerOptions ?? null)).toEqual([{ openaiCompatible: { cache_control: ephemeral } }, null]);
    const user = placeCacheBreakpoints(prompt(), 5, { providers: ["openaiCompatible"] })[4];
    expect(user.role === "user" && user.content.map((p) => p.providerOptions ?? null)).toEqual([null, { openaiCompatible: { cache_control: ephemeral } }]);
  });

  it("removes the markers the application set for the chosen providers, keeping its other options, and writes Anthropic's lifetime when asked", () => {
    const input = prompt();
    input[1].providerOptions = { anthropic: { cacheControl: ephemeral, other: 1 }, custom: { keep: true } };
    input[4].providerOptions = { bedrock: { cachePoint: { type: "default" } } };
    const out = placeCacheBreakpoints(input, 0, { providers: ["anthropic", "bedrock"], anthropicTtl: "1h" });
    expect(out[0].providerOptions).toEqual({ anthropic: { cacheControl: { type: "ephemeral", ttl: "1h" } }, bedrock: { cachePoint: { type: "default" } } });
    expect(out[1].providerOptions).toEqual({ anthropic: { other: 1 }, custom: { keep: true } });
    expect(out[4].providerOptions).toBeUndefined();
  });

  it("with no system prompt and nothing stable, places nothing", () => {
    const out = placeCacheBreakpoints(prompt().slice(1), 0);
    expect(out.every((m) => m.providerOptions === undefined)).toBe(true);
  });
});

describe("promptCacheOf (the provider's usage as contextd's PromptCache)", () => {
  const usage = (cacheRead: number | undefined, cacheWrite: number | undefined) => ({
    inputTokens: { total: 5000, noCache: 5000 - (cacheRead ?? 0), cacheRead, cacheWrite },
    outputTokens: { total: 40, text: 40, reasoning: 0 },
  });

  it("reports reads, writes and output of the call, and when the cache was touched", () => {
    expect(promptCacheOf(usage(4000, 600), undefined, 1_000)).toEqual({
      retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
      lastCallInputTokens: 5000,
      lastCallCacheReadTokens: 4000,
      lastCallCacheWriteTokens: 600,
      lastCallOutputTokens: 40,
      broke: false,
      lastTouchMs: 1_000,
      expiresAtMs: 0,
    });
  });

  it("says nothing when the provider said nothing of its cache, and calls a read under half the previous one broken", () => {
    expect(promptCacheOf(usage(undefined, undefined), undefined, 1)).toBeUndefined();
    const warm = promptCacheOf(usage(4000, 0), undefined, 1);
    expect(promptCacheOf(usage(1500, 0), warm, 2)?.broke).toBe(true);
    expect(promptCacheOf(usage(3000, 0), warm, 2)?.broke).toBe(false);
    // Nothing read or written: the last touch stays the previous call's.
    expect(promptCacheOf(usage(0, 0), warm, 9)?.lastTouchMs).toBe(1);
  });
});
