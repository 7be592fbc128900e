import {
  CompactionTarget,
  PromptAuthority,
  status,
  SubagentContextMode,
  SubagentEndReason,
  type ContextdClient,
  type ServiceError,
  type SessionRef,
} from "contextd/client";
import { fromContextdMessage, openclawMessageKey, toContextdMessage, type AgentMessage } from "contextd/openclaw";
import type { Budgets } from "./budget.js";
import { keyFor, missingFromContextd, turnKey, turnMessageKeys } from "./catch-up.js";
import type { PluginConfig } from "./config.js";
import { agentOf, readStoredMessages, readTranscript, type StoredMessage } from "./openclaw-runtime.js";
import { contextProjectionOf, promptCacheOf, promptCacheOfMessages } from "./prompt-cache.js";
import type { ServingLog } from "./serving-log.js";
import type { CompactParams, CompactResult, ContextEngine, PluginLogger, SessionParams, SessionTarget } from "./openclaw-api.js";

export const ENGINE_ID = "contextd";
export const VERSION = "0.1.0";

/**
 * The OpenClaw context engine whose every lifecycle method is a call to contextd's SessionService.
 * contextd owns the transcript the model sees and its compaction; OpenClaw keeps its own
 * transcript too, which is what lets the agent keep answering while contextd is away:
 *
 * - assemble: contextd's context (at a turn's start catching up first on turns it missed, see
 *   catch-up.ts); when contextd cannot be reached, OpenClaw's own history, unchanged, with a warning.
 * - commitTurn (how OpenClaw 2026.9.x hands over each accepted turn): AppendMessages with the
 *   turn's advancement key as the idempotency key, so OpenClaw's retries land once, and each
 *   message's key, so a message that reached contextd another way is not stored twice. When contextd
 *   cannot be reached it throws: OpenClaw keeps the turn in its outbox and commits it again before
 *   the next turn (which, until then, runs on OpenClaw's built-in engine).
 * - compact: contextd's Compact, OpenClaw's abort signal as cancellation and the safety timeout as
 *   the deadline.
 */
export function createEngine(cx: ContextdClient, config: PluginConfig, log: PluginLogger, shared: EngineShared): ContextEngine {
  const ref = (sessionId: string, sessionKey?: string, target?: SessionTarget): SessionRef => ({
    sessionId,
    sessionKey: sessionKey ?? target?.sessionKey ?? "",
    agentId: config.agentId ?? target?.agentId ?? agentOf(sessionKey ?? target?.sessionKey) ?? "",
  });
  const append = async (session: SessionRef, messages: AgentMessage[], idempotencyKey: string, isHeartbeat = false, messageKeys?: string[]) => {
    if (messages.length === 0) return { replayed: false, entryIds: [] as string[], heldIndexes: [] as number[] };
    const converted = messages.map((m, i) => toContextdMessage(m, `messages[${i}]`));
    const keyed = messageKeys?.some((k) => k !== "") ? { messageKeys } : {};
    return cx.appendMessages({ session, messages: converted, idempotencyKey, isHeartbeat, ...keyed });
  };
  const warn = (what: string, err: unknown) => log.warn(`contextd: ${what}: ${describe(err)}`);

  /**
   * Appends the stored messages of the session contextd does not have yet (catch-up.ts): turns
   * OpenClaw ran on its own engine while a commit could not reach contextd, and anything else
   * OpenClaw holds that never reached the plugin. Only at a turn's start, where OpenClaw fences the
   * read before the turn's own messages (those come with commitTurn).
   */
  const catchUp = async (session: SessionRef, sessionId: string, stored: StoredMessage[]) => {
    let mark = { lastMessageKey: "", lastMessageTimestampMs: 0 };
    try {
      const info = (await cx.getSession({ session })).info!;
      mark = { lastMessageKey: info.lastMessageKey, lastMessageTimestampMs: Number(info.lastMessageTimestampMs) };
    } catch (err) {
      if (code(err) !== status.NOT_FOUND) throw err;
    }
    const missing = missingFromContextd(stored, mark);
    let caughtUp = 0;
    for (let i = 0; i < missing.length; i += CATCH_UP_BATCH) {
      const batch = missing.slice(i, i + CATCH_UP_BATCH);
      const keys = batch.map((m) => openclawMessageKey(m.entryId));
      const res = await append(
        session,
        batch.map((m) => m.message),
        "",
        false,
        keys,
      );
      caughtUp += batch.length - res.heldIndexes.length;
    }
    if (caughtUp > 0) log.info(`contextd: caught up session ${sessionId} with ${caughtUp} message(s) it had not seen`);
  };

  return {
    info: {
      id: ENGINE_ID,
      name: "contextd",
      version: VERSION,
      ownsCompaction: true,
      turnMaintenanceMode: "foreground",
      transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" },
    },

    // A session OpenClaw had before it used contextd: import its whole transcript (every entry of
    // its tree, with OpenClaw's ids) through OpenClaw's own reader. OpenClaw calls bootstrap before
    // every attempt of a session that has messages, so all but the first find it there.
    async bootstrap(p: SessionParams) {
      const session = ref(p.sessionId, p.sessionKey, p.sessionTarget);
      try {
        await cx.getSession({ session });
        return { bootstrapped: false, reason: "contextd already has this session" };
      } catch (err) {
        if (code(err) !== status.NOT_FOUND) {
          warn("bootstrap", err);
          return { bootstrapped: false, reason: `contextd unreachable: ${describe(err)}` };
        }
      }
      try {
        const rows = await readTranscript(p.sessionId, p.sessionKey, p.sessionTarget);
        if (!rows || rows.length <= 1) return { bootstrapped: false, reason: "OpenClaw has no transcript to import; assemble catches up" };
        const jsonl = Buffer.from(rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
        const res = await cx.importTranscript({ session, jsonl });
        log.info(`contextd: imported session ${p.sessionId} from OpenClaw (${res.importedEntries} entries, ${res.activeMessages} in view)`);
        return { bootstrapped: true, importedMessages: res.activeMessages };
      } catch (err) {
        if (code(err) === status.ALREADY_EXISTS) return { bootstrapped: false, reason: "imported meanwhile" };
        warn(`bootstrap could not import session ${p.sessionId}; assemble catches up instead`, err);
        return { bootstrapped: false, reason: describe(err) };
      }
    },

    async assemble(p) {
      const session = ref(p.sessionId, p.sessionKey);
      // OpenClaw passes runtimeContext (undefined) only to a turn's first assemble; the ones before
      // each model request of its tool loop have none (budget.ts).
      const turnStart = "runtimeContext" in p;
      const prompt = userPrompt(p.prompt);
      const request = {
        session,
        tokenBudget: shared.budgets.forAssemble(p.sessionId, p, turnStart),
        // OpenClaw's prompt is the user message it is about to send, not in the transcript yet. When
        // it passes none (assembling between tool calls), contextd uses the latest user message of
        // the session, which catch-up below has made the one OpenClaw holds.
        ...(prompt !== undefined ? { prompt } : {}),
        model: p.model ?? "",
        availableTools: p.availableTools ? [...p.availableTools] : [],
        // OpenClaw's cache figures of the last model call, for cache-aware engines (prompt-cache.ts);
        // from its messages' usage when it passes none. Not between tool calls: OpenClaw's messages
        // then end before the turn (its durable path), and the newest usage there is stale.
        ...(turnStart ? { promptCache: promptCacheOf(p.runtimeContext) ?? promptCacheOfMessages(p.messages) } : {}),
      };
      try {
        if (turnStart) {
          const stored = await readStoredMessages(p.sessionId, p.sessionKey);
          if (stored) await catchUp(session, p.sessionId, stored);
        }
        const res = await assembleOrNothing(cx, request);
        if (!res) return { messages: p.messages, estimatedTokens: 0 };
        shared.serving.served(p.sessionId, res);
        const projection = contextProjectionOf(res.contextProjection);
        return {
          messages: res.messages.map(fromContextdMessage),
          estimatedTokens: res.estimatedTokens,
          systemPromptAddition: res.systemPromptAddition || undefined,
          promptAuthority: res.promptAuthority === PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW ? "preassembly_may_overflow" : "assembled",
          ...(projection ? { contextProjection: projection } : {}),
        };
      } catch (err) {
        shared.serving.unreachable(p.sessionId, `assemble failed, the model gets OpenClaw's own history of session ${p.sessionId}`, describe(err));
        return { messages: p.messages, estimatedTokens: 0 };
      }
    },

    // The turn's messages under their message keys, so that a turn contextd already caught up (or
    // imported) is held rather than stored again; the advancement key makes OpenClaw's retries of
    // the commit land once and answer `duplicate`. What OpenClaw stores before the turn and contextd
    // lacks — a turn that failed, one that ran on OpenClaw's own engine — goes first, so contextd's
    // order is OpenClaw's (a commit OpenClaw held in its outbox while contextd was away lands before
    // what followed it).
    async commitTurn(p) {
      const session = ref(p.sessionId, p.sessionKey, p.sessionTarget);
      const stored = await readStoredMessages(p.sessionId, p.sessionKey, p.sessionTarget).catch((err: unknown) => {
        warn(`commitTurn could not read OpenClaw's transcript of session ${p.sessionId}; the turn is appended without message keys`, err);
        return undefined;
      });
      const start = p.admission?.activeMessagePosition;
      if (stored && typeof start === "number" && start > 0) await catchUp(session, p.sessionId, stored.slice(0, start));
      const keys = stored ? turnMessageKeys(p.messages, stored, p.admission, p.terminal) : undefined;
      const res = await append(session, p.messages, turnKey(p.advancementKey), p.isHeartbeat === true, keys);
      shared.serving.committed(p.sessionId);
      return { status: res.replayed ? "duplicate" : "committed" };
    },

    async ingest(p) {
      await append(ref(p.sessionId, p.sessionKey), [p.message], keyFor("ingest", p.sessionId, [p.message]), p.isHeartbeat === true);
      return { ingested: true };
    },

    async ingestBatch(p) {
      await append(ref(p.sessionId, p.sessionKey), p.messages, keyFor("batch", p.sessionId, p.messages), p.isHeartbeat === true);
      return { ingestedCount: p.messages.length };
    },

    // Only on OpenClaw's non-durable path (runs without a turn recorder): the turn's new messages
    // are appended here, since OpenClaw then calls afterTurn instead of ingest.
    async afterTurn(p) {
      const session = ref(p.sessionId, p.sessionKey, p.sessionTarget);
      const fresh = p.messages.slice(p.prePromptMessageCount).filter((m) => m.role !== "compactionSummary" && m.role !== "branchSummary");
      await append(session, fresh, keyFor("after-turn", p.sessionId, fresh), p.isHeartbeat === true);
      await cx.afterTurn({
        session,
        prePromptMessageCount: p.prePromptMessageCount,
        autoCompactionSummary: p.autoCompactionSummary ?? "",
        tokenBudget: p.tokenBudget ?? 0,
        promptCache: promptCacheOf(p.runtimeContext),
      });
    },

    async maintain(p) {
      try {
        const res = await cx.maintain({ session: ref(p.sessionId, p.sessionKey, p.sessionTarget) }, { signal: p.abortSignal });
        return { changed: res.changed, bytesFreed: res.bytesFreed, rewrittenEntries: res.rewrittenEntries, reason: res.reason };
      } catch (err) {
        if (code(err) !== status.NOT_FOUND) warn("maintain", err);
        return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: describe(err) };
      }
    },

    // Overflow recovery compacts in the middle of a turn whose messages so far (the user's request,
    // the tool calls made) OpenClaw has stored but not committed; its retry then asks the model to
    // "continue the current task from the existing transcript". So contextd first catches up on what
    // OpenClaw stores (by key: commitTurn holds them later), and the compacted context it assembles
    // for the retry holds the turn so far.
    async compact(p) {
      const session = ref(p.sessionId, p.sessionKey, p.sessionTarget);
      try {
        const stored = await readStoredMessages(p.sessionId, p.sessionKey, p.sessionTarget);
        if (stored) await catchUp(session, p.sessionId, stored);
      } catch (err) {
        warn(`compact could not catch up session ${p.sessionId} first`, err);
      }
      return compact(cx, config, session, p, shared.budgets.forCompact(p.tokenBudget));
    },

    async prepareSubagentSpawn(p) {
      if (!p.parentSessionId) return undefined;
      const child = { sessionId: p.childSessionId ?? p.childSessionKey, sessionKey: p.childSessionKey, agentId: config.agentId ?? "" };
      const res = await cx.prepareSubagentSpawn({
        parent: { sessionId: p.parentSessionId, sessionKey: p.parentSessionKey, agentId: config.agentId ?? "" },
        child,
        contextMode: p.contextMode === "fork" ? SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK : SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED,
        ttlMs: p.ttlMs ?? 0,
      });
      children.set(p.childSessionKey, child.sessionId);
      return { rollback: async () => void (await cx.rollbackSubagentSpawn({ rollbackHandle: res.rollbackHandle })) };
    },

    async onSubagentEnded(p) {
      const sessionId = children.get(p.childSessionKey) ?? p.childSessionKey;
      children.delete(p.childSessionKey);
      try {
        await cx.endSubagent({ child: { sessionId, sessionKey: p.childSessionKey }, reason: END_REASONS[p.reason] });
      } catch (err) {
        if (code(err) !== status.NOT_FOUND) warn("onSubagentEnded", err);
      }
    },

    // The channel is shared by every engine instance of the process (config.ts): nothing to free.
    async dispose() {},
  };
}

/** What every engine instance of the process shares (OpenClaw builds one per turn): budgets seen, what was logged. */
export interface EngineShared {
  budgets: Budgets;
  serving: ServingLog;
}

/** Messages per catch-up append: well under contextd's default limits.max_messages_per_append (1000). */
const CATCH_UP_BATCH = 200;

/**
 * The user's text in OpenClaw's prompt. When it retries a turn (overflow recovery, an interrupted
 * attempt) the prompt is a continuation OpenClaw writes around the queued user message, or only an
 * instruction to continue: the user's text is taken out of the first, and the second is no prompt at
 * all (contextd then uses the latest user message of the session). Any other prompt is the user's.
 */
export function userPrompt(prompt: string | undefined): string | undefined {
  if (prompt === undefined) return undefined;
  const queued = /^\[Queued user message from a previous active turn;[^\]\n]*\]\n([\s\S]*?)\n\nContinue the current task/.exec(prompt);
  if (queued) return queued[1];
  if (prompt.startsWith("Continue the current task from the existing transcript")) return undefined;
  return prompt;
}

/** contextd session ids of the subagents this process spawned, by OpenClaw child session key. */
const children = new Map<string, string>();

const END_REASONS = {
  deleted: SubagentEndReason.SUBAGENT_END_REASON_DELETED,
  completed: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED,
  swept: SubagentEndReason.SUBAGENT_END_REASON_SWEPT,
  released: SubagentEndReason.SUBAGENT_END_REASON_RELEASED,
} as const;

async function compact(cx: ContextdClient, config: PluginConfig, session: SessionRef, p: CompactParams, tokenBudget: number): Promise<CompactResult> {
  try {
    const res = await cx.compact(
      {
        session,
        tokenBudget,
        force: p.force === true,
        compactionTarget: p.compactionTarget === "threshold" ? CompactionTarget.COMPACTION_TARGET_THRESHOLD : CompactionTarget.COMPACTION_TARGET_BUDGET,
        customInstructions: p.customInstructions ?? "",
        currentTokenCount: p.currentTokenCount ?? 0,
      },
      { signal: p.abortSignal, timeoutMs: config.compactTimeoutMs },
    );
    if (!res.compacted || !res.result) return { ok: res.ok, compacted: false, reason: res.reason || undefined };
    const r = res.result;
    // The first kept entry is a contextd entry id, which means nothing in OpenClaw's transcript.
    return {
      ok: true,
      compacted: true,
      reason: res.reason || undefined,
      result: {
        summary: r.summary,
        tokensBefore: r.tokensBefore,
        tokensAfter: r.tokensAfter,
        details: { contextd: { engineId: res.engineId, ...(r.details ?? {}) } },
      },
    };
  } catch (err) {
    if (code(err) === status.NOT_FOUND) return { ok: true, compacted: false, reason: "contextd has no history of this session yet" };
    return { ok: false, compacted: false, reason: `contextd Compact failed: ${describe(err)}` };
  }
}

/** Assemble, or undefined when contextd has no such session yet. */
async function assembleOrNothing(cx: ContextdClient, request: Parameters<ContextdClient["assemble"]>[0]) {
  try {
    return await cx.assemble(request);
  } catch (err) {
    if (code(err) === status.NOT_FOUND) return undefined;
    throw err;
  }
}

function code(err: unknown): number | undefined {
  return typeof (err as ServiceError)?.code === "number" ? (err as ServiceError).code : undefined;
}

function describe(err: unknown): string {
  const e = err as ServiceError;
  if (typeof e?.code === "number") return `${status[e.code] ?? e.code}: ${e.details || e.message}`;
  return err instanceof Error ? err.message : String(err);
}
