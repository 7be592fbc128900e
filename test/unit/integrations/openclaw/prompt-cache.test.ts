/**
 * The OpenClaw plugin's mapping of OpenClaw's prompt-cache telemetry to contextd's, and of an
 * engine's context projection back: OpenClaw's own figures reach contextd whatever their shape
 * (never a refused turn), and only a thread bootstrap is handed to OpenClaw.
 */
import { describe, expect, it } from "vitest";
import { contextProjectionOf, promptCacheOf, promptCacheOfMessages } from "../../../../integrations/openclaw/src/prompt-cache.js";
import { ContextProjection_Mode, PromptCacheRetention } from "../../../../src/contract/gen/contextd/v1/types.js";

describe("OpenClaw prompt-cache telemetry → contextd", () => {
  it("maps retention, usage (input counts cache reads and writes), the break and the times", () => {
    const runtimeContext = {
      promptCache: {
        retention: "short",
        lastCallUsage: { input: 1_200, output: 300, cacheRead: 38_000, cacheWrite: 800 },
        observation: { broke: true, changes: [{ code: "tools", detail: "a tool was added" }] },
        lastCacheTouchAt: 1_796_000_000_000,
        expiresAt: 1_796_000_300_000,
      },
    };
    expect(promptCacheOf(runtimeContext)).toEqual({
      retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_SHORT,
      lastCallInputTokens: 40_000,
      lastCallCacheReadTokens: 38_000,
      lastCallCacheWriteTokens: 800,
      lastCallOutputTokens: 300,
      broke: true,
      lastTouchMs: 1_796_000_000_000,
      expiresAtMs: 1_796_000_300_000,
    });
  });

  it("sends nothing when OpenClaw sent nothing, and never a figure contextd would refuse", () => {
    expect(promptCacheOf(undefined)).toBeUndefined();
    expect(promptCacheOf({})).toBeUndefined();
    expect(promptCacheOf({ promptCache: { retention: "forever", lastCallUsage: { input: -5, output: 1e20, cacheRead: "x" }, expiresAt: 9e18 } })).toEqual({
      retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
      lastCallInputTokens: 0,
      lastCallCacheReadTokens: 0,
      lastCallCacheWriteTokens: 0,
      lastCallOutputTokens: 0xffff_ffff,
      broke: false,
      lastTouchMs: 0,
      expiresAtMs: 0,
    });
  });
});

describe("OpenClaw's messages' usage → contextd (the turn start, where OpenClaw passes no promptCache)", () => {
  it("takes the newest assistant message with usage, passing over one without (an aborted call), and its time when the cache was touched", () => {
    const messages = [
      { role: "user", content: "a" },
      { role: "assistant", usage: { input: 900, output: 40, cacheRead: 4_000, cacheWrite: 100 }, timestamp: 1_796_000_000_000 },
      { role: "toolResult", content: "x" },
      { role: "assistant", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, timestamp: 1_796_000_100_000 },
    ];
    expect(promptCacheOfMessages(messages)).toEqual({
      retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
      lastCallInputTokens: 5_000,
      lastCallCacheReadTokens: 4_000,
      lastCallCacheWriteTokens: 100,
      lastCallOutputTokens: 40,
      broke: false,
      lastTouchMs: 1_796_000_000_000,
      expiresAtMs: 0,
    });
    // Nothing read or written: when the cache was touched is unknown.
    expect(promptCacheOfMessages([{ role: "assistant", usage: { input: 10, output: 5 }, timestamp: 1_796_000_000_000 }])?.lastTouchMs).toBe(0);
    expect(promptCacheOfMessages([{ role: "user", content: "a" }])).toBeUndefined();
    expect(promptCacheOfMessages(undefined)).toBeUndefined();
  });
});

describe("contextd's context projection → OpenClaw", () => {
  it("hands OpenClaw a thread bootstrap with its epoch; per-turn (or none) leaves OpenClaw's default", () => {
    expect(contextProjectionOf({ mode: ContextProjection_Mode.MODE_THREAD_BOOTSTRAP, epoch: "e7", fingerprint: "fp" })).toEqual({
      mode: "thread_bootstrap",
      epoch: "e7",
      fingerprint: "fp",
    });
    expect(contextProjectionOf({ mode: ContextProjection_Mode.MODE_PER_TURN, epoch: "", fingerprint: "" })).toBeUndefined();
    expect(contextProjectionOf(undefined)).toBeUndefined();
  });
});
