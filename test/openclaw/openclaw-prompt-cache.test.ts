/**
 * Prompt-cache telemetry from the real OpenClaw (2026.9.6) to a contextd engine, and a context
 * projection from the engine back to OpenClaw: the chat-completions stand-in reports cached tokens
 * as OpenAI does (`usage.prompt_tokens_details.cached_tokens`), OpenClaw records them on its
 * assistant messages, the plugin turns the newest into AssembleRequest.prompt_cache at the start of
 * the next turn (OpenClaw passes its own `runtimeContext.promptCache` only to `afterTurn` of its
 * non-durable path, which the plugin's durable turns never take), and the TypeScript test engine
 * records the RuntimeSettings.prompt_cache it is handed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PromptCacheRetention } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { startModelServer, type ModelServer, type RecordedRequest } from "./helpers/model-server.js";
import { OpenClawHome } from "./helpers/openclaw-home.js";
import { ensureOpenClaw } from "./helpers/openclaw-install.js";

const ENGINE = "cache-aware";

describe("OpenClaw's prompt-cache figures reach a contextd engine; the engine's projection reaches OpenClaw", () => {
  let model: ModelServer;
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let engine: EngineProcess;
  let home: OpenClawHome;

  beforeAll(async () => {
    const install = await ensureOpenClaw();
    model = await startModelServer({ promptCache: true });
    contextd = await startContextd({ config: { slots: { context_engine: ENGINE } } });
    cx = new ContextdClient({ address: contextd.address });
    engine = await startTsEngine({ engineId: ENGINE, registry: contextd.address, owner: "team" });
    expect((await engine.registered).ok).toBe(true);
    home = new OpenClawHome(install, { modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
  }, 900_000);
  afterAll(async () => {
    cx?.close();
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
    await model?.close();
    home?.cleanup();
  });

  const assembles = () => engine.events().filter((e) => e.event === "assemble_request");
  /** The figures contextd's PromptCache says for a model request the stand-in answered. */
  const figuresOf = (r: RecordedRequest) => ({
    retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
    lastCallInputTokens: r.usage!.prompt_tokens,
    lastCallCacheReadTokens: r.usage!.prompt_tokens_details!.cached_tokens,
    lastCallCacheWriteTokens: 0,
    lastCallOutputTokens: r.usage!.completion_tokens,
    broke: false,
    expiresAtMs: 0,
  });

  it("each turn's first Assemble carries the cache figures the provider reported for the previous turn's last model call", async () => {
    const turns = ["First turn SAY:one", "Read it twice TOOLS:2:cache then SAY:two", "Third turn SAY:three"];
    const lastRequest: RecordedRequest[] = [];
    const firstAssemble: number[] = [];
    for (const message of turns) {
      firstAssemble.push(assembles().length);
      const t = await home.turn("cache", message);
      expect(t.code, t.stderr).toBe(0);
      lastRequest.push(model.requests().at(-1)!);
    }
    expect(lastRequest.map((r) => r.answer)).toEqual(["reply", "reply", "reply"]);
    // The stand-in's cache served the later turns' prefixes (OpenClaw's system prompt and history).
    expect(lastRequest[2].usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);

    const events = assembles();
    for (const k of [1, 2]) {
      const figures = events[firstAssemble[k]]?.prompt_cache as Record<string, unknown> | null | undefined;
      expect(figures, `turn ${k + 1}'s first Assemble: ${JSON.stringify(events.slice(firstAssemble[k]))}`).toMatchObject(figuresOf(lastRequest[k - 1]));
      // When the call read its prefix from the cache, OpenClaw's message says when; else it is unknown.
      if (figuresOf(lastRequest[k - 1]).lastCallCacheReadTokens > 0) expect(figures!.lastTouchMs as number).toBeGreaterThan(Date.now() - 600_000);
      else expect(figures!.lastTouchMs).toBe(0);
    }
    // The third turn's figures are of a call that read from the cache.
    expect((events[firstAssemble[2]].prompt_cache as { lastCallCacheReadTokens: number }).lastCallCacheReadTokens).toBeGreaterThan(0);
  }, 600_000);

  it("a THREAD_BOOTSTRAP projection the engine answers is handed to OpenClaw, whose embedded runner goes on per turn with the engine's context", async () => {
    engine.control({ assemble: "projection" });
    const before = model.requests().length;
    const t = await home.turn("cache", "Projected SAY:four");
    expect(t.code, t.stderr).toBe(0);
    expect(t.text).toBe("four");
    // The engine answered this turn's Assemble with its projection, and the plugin served it to OpenClaw.
    expect(engine.events().some((e) => e.event === "call" && e.op === "assemble" && e.mode === "projection")).toBe(true);
    const sent = model.requests().slice(before);
    expect(model.textOf(sent.at(-1)!)).toContain("Third turn SAY:three");
    // contextd passed the projection through to the plugin (the engine's answer, not a fallback).
    expect(t.stderr).not.toMatch(/fell back|fallback/i);
  }, 300_000);
});
