/**
 * The prompt-cache contract between runtime, contextd and a real sidecar (the TS test engine):
 * a runtime's cache telemetry (AssembleRequest / AfterTurnRequest.prompt_cache) reaches the engine
 * in RuntimeSettings.prompt_cache as sent; telemetry an engine could misread is refused before any
 * engine hears of it; an engine's context projection (THREAD_BOOTSTRAP with an epoch) reaches the
 * runtime as answered, and one that breaks the contract falls back to legacy, which never projects.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextProjection_Mode, Mode, PromptCacheRetention, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { errorDetails } from "../../src/contract/error-details.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";

const ENGINE = "cache-aware";
const TELEMETRY = {
  retention: PromptCacheRetention.PROMPT_CACHE_RETENTION_SHORT,
  lastCallInputTokens: 41_000,
  lastCallCacheReadTokens: 38_500,
  lastCallCacheWriteTokens: 2_500,
  lastCallOutputTokens: 900,
  broke: false,
  lastTouchMs: 1_796_000_000_000,
  expiresAtMs: 1_796_000_300_000,
};

describe("prompt-cache telemetry in, context projection out", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let engine: EngineProcess;
  const session = { sessionId: "cache-aware-1" };
  const events = (name: string) => engine.events().filter((e) => e.event === name);

  beforeAll(async () => {
    cd = await startContextd({ config: { slots: { context_engine: ENGINE } } });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 30_000 });
    engine = await startTsEngine({ engineId: ENGINE, registry: cd.address, owner: "team", capabilities: ["after_turn"] });
    expect((await engine.registered).ok).toBe(true);
    await cx.appendMessages({
      session,
      messages: [textMessage(Role.ROLE_USER, "Where is the cache config?"), textMessage(Role.ROLE_ASSISTANT, "config/cache.yaml")],
    });
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await engine?.stop().catch(() => undefined);
    await cd?.cleanup();
  });

  it("the runtime's cache figures reach the engine with Assemble and AfterTurn, as sent; none sent, none passed", async () => {
    await cx.assemble({ session, tokenBudget: 8_000, promptCache: TELEMETRY });
    await cx.assemble({ session, tokenBudget: 8_000 });
    await engine.waitForEvent(() => events("assemble_request").length === 2);
    expect(events("assemble_request").map((e) => e.prompt_cache)).toEqual([TELEMETRY, null]);

    const turn = await cx.afterTurn({ session, prePromptMessageCount: 1, tokenBudget: 8_000, promptCache: { ...TELEMETRY, broke: true } });
    expect(turn.engineId).toBe(ENGINE);
    await engine.waitForEvent(() => events("after_turn_request").length === 1);
    expect(events("after_turn_request")[0].prompt_cache).toEqual({ ...TELEMETRY, broke: true });
  });

  it("an unknown retention or an impossible time is INVALID_ARGUMENT naming the field, and no engine is called", async () => {
    const before = events("assemble_request").length;
    for (const [promptCache, field] of [
      [{ ...TELEMETRY, retention: 99 as PromptCacheRetention }, "prompt_cache.retention"],
      [{ ...TELEMETRY, expiresAtMs: 9e15 }, "prompt_cache.expires_at_ms"],
    ] as const) {
      const err = (await cx.assemble({ session, tokenBudget: 8_000, promptCache }).catch((e: unknown) => e)) as ServiceError;
      expect(err.code).toBe(status.INVALID_ARGUMENT);
      expect(errorDetails(err)?.fieldViolations.map((v) => v.field)).toEqual([field]);
    }
    const err = (await cx
      .afterTurn({ session, promptCache: { ...TELEMETRY, retention: 42 as PromptCacheRetention } })
      .catch((e: unknown) => e)) as ServiceError;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    // The server stayed up and no engine heard of the refused calls.
    expect((await cx.assemble({ session, tokenBudget: 8_000 })).engineId).toBe(ENGINE);
    await engine.waitForEvent(() => events("assemble_request").length === before + 1);
  });

  it("an engine's THREAD_BOOTSTRAP projection reaches the runtime; per-turn engines send none", async () => {
    expect((await cx.assemble({ session, tokenBudget: 8_000 })).contextProjection).toBeUndefined();
    engine.control({ assemble: "projection" });
    const answer = await cx.assemble({ session, tokenBudget: 8_000 });
    expect(answer.engineId).toBe(ENGINE);
    expect(answer.contextProjection).toEqual({ mode: ContextProjection_Mode.MODE_THREAD_BOOTSTRAP, epoch: "epoch-1", fingerprint: "fp-1" });
  });

  it("THREAD_BOOTSTRAP without an epoch is a contract violation: legacy answers, per turn", async () => {
    engine.control({ assemble: "projection_bad" });
    const answer = await cx.assemble({ session, tokenBudget: 8_000 });
    expect(answer.engineId).toBe("legacy");
    expect(answer.mode).toBe(Mode.MODE_FALLBACK);
    expect(answer.fallbackReason).toContain("epoch");
    expect(answer.contextProjection).toBeUndefined();
  });
});
