import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3CallOptions, LanguageModelV3Middleware } from "@ai-sdk/provider";
import { generateText, stepCountIs, tool, wrapLanguageModel } from "ai";
import { ContextdClient, PromptCacheRetention } from "contextd/client";
import { contextdMiddleware, type ContextdMiddlewareOptions } from "@contextd/ai-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../../helpers/engine-process.js";
import { startModelServer, type ChatMessage, type ModelServer, type RecordedRequest } from "../../openclaw/helpers/model-server.js";

/**
 * The AI SDK middleware's prompt-cache side, through the published `ai` and
 * `@ai-sdk/openai-compatible` against a real contextd and the chat-completions stand-in with
 * prompt caching on (it reports `prompt_tokens_details.cached_tokens` for the prefix it has seen):
 * cache breakpoints where contextd says the stable prefix ends, and the provider's cache figures
 * back to contextd with the next call.
 */
let model: ModelServer;

beforeAll(async () => {
  model = await startModelServer({ promptCache: true });
});
afterAll(async () => {
  await model?.close();
});

const provider = () => createOpenAICompatible({ name: "standin", baseURL: model.baseUrl });

/** The `read` tool the stand-in calls: a long answer, so that a tool loop outgrows a small budget. */
const read = tool({
  description: "Read a file",
  inputSchema: z.object({ path: z.string() }),
  execute: async ({ path }, { toolCallId }) => `${path} (${toolCallId}): ${"the quick brown fox jumps over the lazy dog ".repeat(8)}`,
});

const hasMarker = (v: unknown): boolean =>
  Array.isArray(v) ? v.some(hasMarker) : !!v && typeof v === "object" && ("cache_control" in v || Object.values(v).some(hasMarker));
/** The indexes of the request's messages that carry a cache marker (on the message or a content part). */
const marked = (r: RecordedRequest) => (r.body.messages ?? []).flatMap((m, i) => (hasMarker(m) ? [i] : []));
/** What the cache sees of a message: everything but its marker. */
const content = (m: ChatMessage) => JSON.stringify(m, (k, v: unknown) => (k === "cache_control" ? undefined : v));
/** How many leading messages of `b` are identical to `a`'s. */
function commonPrefix(a: ChatMessage[], b: ChatMessage[]): number {
  let n = 0;
  while (n < a.length && n < b.length && content(a[n]) === content(b[n])) n++;
  return n;
}

describe("cache breakpoints from contextd's stable-prefix hint", () => {
  let contextd: ContextdProcess;
  let client: ContextdClient;

  beforeAll(async () => {
    // A small recent tail, so that a small budget makes contextd compact during the loop.
    contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 200 } } });
    client = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    client?.close();
    await contextd?.stop();
  });

  const wrapped = (sessionId: string, more: Partial<ContextdMiddlewareOptions> = {}, inner: LanguageModelV3Middleware[] = []) =>
    wrapLanguageModel({ model: provider()("fake-model"), middleware: [contextdMiddleware({ client, sessionId, ...more }), ...inner] });

  async function loop(sessionId: string, steps: number, more: Partial<ContextdMiddlewareOptions>, inner: LanguageModelV3Middleware[] = []) {
    const before = model.requests().length;
    const result = await generateText({
      model: wrapped(sessionId, more, inner),
      tools: { read },
      stopWhen: stepCountIs(steps + 1),
      headers: { "x-tool-loop": `${steps}:${sessionId}` },
      system: "You read files.",
      prompt: "Read probe.txt again and again.",
    });
    expect(result.steps).toHaveLength(steps + 1);
    return model.requests().slice(before);
  }

  it("marks the system prompt and the last message of the stable prefix, which moves forward as the history grows and back when contextd compacts", async () => {
    const sent = await loop("marked", 24, { tokenBudget: 1500, cacheBreakpoints: { providers: ["openaiCompatible"] } });
    let compacted = false;
    let grew = 0;
    let previousEnd = -1;
    sent.forEach((r, k) => {
      const messages = r.body.messages ?? [];
      expect(messages[0]).toMatchObject({ role: "system", content: "You read files." });
      // The stable prefix, as the stand-in's cache sees it: the messages identical to the previous request's.
      const stable = k === 0 ? 0 : commonPrefix(sent[k - 1].body.messages ?? [], messages);
      expect(marked(r), `request ${k}`).toEqual(stable > 1 ? [0, stable - 1] : [0]);
      if (stable > 0 && stable - 1 < previousEnd) compacted = true;
      if (stable - 1 > previousEnd) grew++;
      previousEnd = stable - 1;
    });
    // The breakpoint followed the history forward, and went back to the system prompt when the history was compacted.
    expect(grew).toBeGreaterThan(10);
    expect(compacted).toBe(true);
    // A provider caching that prefix served it: the stand-in reported cached tokens for every request but the first.
    expect(sent.slice(1).every((r) => (r.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0)).toBe(true);
  });

  it("places Anthropic's and Bedrock's markers by default, on the same messages, and sends an OpenAI-compatible server none", async () => {
    const seen: LanguageModelV3CallOptions[] = [];
    const recorder: LanguageModelV3Middleware = {
      specificationVersion: "v3",
      transformParams: ({ params }) => {
        seen.push(params);
        return Promise.resolve(params);
      },
    };
    const sent = await loop("defaults", 3, {}, [recorder]);
    expect(sent.flatMap(marked)).toEqual([]);
    expect(seen).toHaveLength(4);
    seen.forEach((params, k) => {
      const at = params.prompt.flatMap((m, i) => (m.providerOptions?.anthropic ? [i] : []));
      const stable = k === 0 ? 0 : commonPrefix(sent[k - 1].body.messages ?? [], sent[k].body.messages ?? []);
      expect(at, `call ${k}`).toEqual(stable > 1 ? [0, stable - 1] : [0]);
      for (const i of at) {
        expect(params.prompt[i].providerOptions).toEqual({ anthropic: { cacheControl: { type: "ephemeral" } }, bedrock: { cachePoint: { type: "default" } } });
      }
    });
  });

  it("with cacheBreakpoints: false the middleware places no marker", async () => {
    const seen: LanguageModelV3CallOptions[] = [];
    const recorder: LanguageModelV3Middleware = {
      specificationVersion: "v3",
      transformParams: ({ params }) => {
        seen.push(params);
        return Promise.resolve(params);
      },
    };
    const sent = await loop("off", 2, { cacheBreakpoints: false }, [recorder]);
    expect(sent.flatMap(marked)).toEqual([]);
    expect(seen.flatMap((p) => p.prompt.filter((m) => m.providerOptions?.anthropic || m.providerOptions?.bedrock))).toEqual([]);
  });

  it("replaces the application's own markers, which contextd may have moved, with its own", async () => {
    const messages = [
      { role: "user" as const, content: "SAY:first", providerOptions: { openaiCompatible: { cache_control: { type: "ephemeral" } } } },
      { role: "assistant" as const, content: "first" },
      { role: "user" as const, content: "SAY:second" },
    ];
    const before = model.requests().length;
    await generateText({ model: wrapped("app-markers", { cacheBreakpoints: { providers: ["openaiCompatible"] } }), system: "You answer.", messages });
    const [r] = model.requests().slice(before);
    // The session's first Assemble: nothing is known to be stable yet; only the system prompt is marked.
    expect(marked(r)).toEqual([0]);
  });
});

describe("the provider's cache figures go back to contextd with the next call", () => {
  const ENGINE = "cache-figures";
  let contextd: ContextdProcess;
  let client: ContextdClient;
  let engine: EngineProcess;

  beforeAll(async () => {
    contextd = await startContextd({ config: { slots: { context_engine: ENGINE } } });
    client = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    engine = await startTsEngine({ engineId: ENGINE, registry: contextd.address, owner: "team" });
    expect((await engine.registered).ok).toBe(true);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("each Assemble of a tool loop carries the cache figures the provider reported for the loop's previous model call", async () => {
    const before = model.requests().length;
    const result = await generateText({
      model: wrapLanguageModel({ model: provider()("fake-model"), middleware: contextdMiddleware({ client, sessionId: "figures" }) }),
      tools: { read },
      stopWhen: stepCountIs(4),
      headers: { "x-tool-loop": "3:figures" },
      system: "You read files.",
      prompt: "Read probe.txt three times.",
    });
    expect(result.steps).toHaveLength(4);
    const sent = model.requests().slice(before);
    expect(sent).toHaveLength(4);
    const assembles = () => engine.events().filter((e) => e.event === "assemble_request");
    await engine.waitForEvent(() => assembles().length === 4);
    const figures = assembles().map((e) => e.prompt_cache as Record<string, unknown> | null);
    // The session's first call has no previous call to report on.
    expect(figures[0]).toBeNull();
    for (let k = 1; k < 4; k++) {
      const usage = sent[k - 1].usage!;
      expect(figures[k], `call ${k}`).toMatchObject({
        retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
        lastCallInputTokens: usage.prompt_tokens,
        lastCallCacheReadTokens: usage.prompt_tokens_details!.cached_tokens,
        lastCallCacheWriteTokens: 0,
        lastCallOutputTokens: usage.completion_tokens,
        broke: false,
        expiresAtMs: 0,
      });
    }
    // Calls after the first read their prefix from the cache: the figures say so, with when.
    expect((figures[2]!.lastCallCacheReadTokens as number) > 0).toBe(true);
    expect(figures[2]!.lastTouchMs as number).toBeGreaterThan(Date.now() - 60_000);
  });
});
