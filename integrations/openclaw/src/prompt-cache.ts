// OpenClaw's prompt-cache telemetry in, and an engine's context projection out: the two fields of
// OpenClaw's context-engine API that contextd passes through (AssembleRequest / AfterTurnRequest
// .prompt_cache, AssembleResponse.context_projection).
import { ContextProjection_Mode, PromptCacheRetention, type ContextProjection, type PromptCache } from "contextd/client";

/** OpenClaw's `runtimeContext.promptCache` (ContextEnginePromptCacheInfo), as far as the plugin reads it. */
interface OpenClawPromptCache {
  retention?: unknown;
  lastCallUsage?: { input?: unknown; output?: unknown; cacheRead?: unknown; cacheWrite?: unknown };
  observation?: { broke?: unknown };
  lastCacheTouchAt?: unknown;
  expiresAt?: unknown;
}

/** OpenClaw's `contextProjection` on an assemble result. */
export interface OpenClawContextProjection {
  mode: "per_turn" | "thread_bootstrap";
  epoch?: string;
  fingerprint?: string;
}

const RETENTION: Record<string, PromptCacheRetention> = {
  none: PromptCacheRetention.PROMPT_CACHE_RETENTION_NONE,
  short: PromptCacheRetention.PROMPT_CACHE_RETENTION_SHORT,
  long: PromptCacheRetention.PROMPT_CACHE_RETENTION_LONG,
  in_memory: PromptCacheRetention.PROMPT_CACHE_RETENTION_IN_MEMORY,
  "24h": PromptCacheRetention.PROMPT_CACHE_RETENTION_24H,
};

const UINT32_MAX = 0xffff_ffff;
/** The furthest a JavaScript Date reaches from the epoch (contextd refuses times beyond it). */
const MAX_DATE_MS = 8.64e15;

const tokens = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.min(Math.floor(v), UINT32_MAX) : 0);
const time = (v: unknown): number => (typeof v === "number" && Number.isSafeInteger(v) && Math.abs(v) <= MAX_DATE_MS ? v : 0);

/**
 * contextd's PromptCache from OpenClaw's runtime context, or undefined when OpenClaw sent none. What
 * OpenClaw reports is telemetry, not input to refuse a turn over: an unknown retention becomes
 * UNSPECIFIED and an impossible figure 0, so contextd's checks never fail the assemble. OpenClaw's
 * `input` is the uncached input (as Anthropic reports it); contextd's input counts every input token,
 * so cache reads and writes are added back.
 */
export function promptCacheOf(runtimeContext: Record<string, unknown> | undefined): PromptCache | undefined {
  const pc = runtimeContext?.promptCache as OpenClawPromptCache | undefined;
  if (!pc || typeof pc !== "object") return undefined;
  const usage = pc.lastCallUsage ?? {};
  const read = tokens(usage.cacheRead);
  const write = tokens(usage.cacheWrite);
  return {
    retention: (typeof pc.retention === "string" && RETENTION[pc.retention]) || PromptCacheRetention.PROMPT_CACHE_RETENTION_UNSPECIFIED,
    lastCallInputTokens: Math.min(tokens(usage.input) + read + write, UINT32_MAX),
    lastCallCacheReadTokens: read,
    lastCallCacheWriteTokens: write,
    lastCallOutputTokens: tokens(usage.output),
    broke: pc.observation?.broke === true,
    lastTouchMs: time(pc.lastCacheTouchAt),
    expiresAtMs: time(pc.expiresAt),
  };
}

/**
 * The cache figures of the newest model call in OpenClaw's messages: the usage OpenClaw records on
 * each assistant message (`usage`: input, output, cacheRead, cacheWrite; a message with no usage,
 * such as an aborted call's, is passed over), as OpenClaw's own tool-loop hook reads them. For a
 * turn's first assemble, where OpenClaw 2026.9 passes no `runtimeContext.promptCache`: it hands
 * engines its telemetry only in `afterTurn` of its non-durable path, and the plugin advances turns
 * durably (`commitTurn`). Retention is not on the messages (UNSPECIFIED); the cache was last touched
 * when that message was written, if the call read or wrote the cache.
 */
export function promptCacheOfMessages(messages: readonly unknown[] | undefined): PromptCache | undefined {
  for (let i = (messages?.length ?? 0) - 1; i >= 0; i--) {
    const m = messages![i] as { role?: unknown; usage?: OpenClawPromptCache["lastCallUsage"]; timestamp?: unknown } | undefined;
    if (m?.role !== "assistant" || !m.usage || typeof m.usage !== "object") continue;
    const u = m.usage;
    if (tokens(u.input) + tokens(u.output) + tokens(u.cacheRead) + tokens(u.cacheWrite) === 0) continue;
    const touched = tokens(u.cacheRead) + tokens(u.cacheWrite) > 0;
    return promptCacheOf({ promptCache: { lastCallUsage: u, ...(touched ? { lastCacheTouchAt: m.timestamp } : {}) } });
  }
  return undefined;
}

/** OpenClaw's contextProjection for contextd's answer; undefined (OpenClaw's per-turn default) unless the engine asked for a thread bootstrap. */
export function contextProjectionOf(projection: ContextProjection | undefined): OpenClawContextProjection | undefined {
  if (projection?.mode !== ContextProjection_Mode.MODE_THREAD_BOOTSTRAP) return undefined;
  return { mode: "thread_bootstrap", epoch: projection.epoch, ...(projection.fingerprint ? { fingerprint: projection.fingerprint } : {}) };
}
