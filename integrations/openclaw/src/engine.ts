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
import { fromContextdMessage, toContextdMessage, type AgentMessage } from "contextd/openclaw";
import { keyFor, missingFromContextd, turnKey } from "./catch-up.js";
import type { PluginConfig } from "./config.js";
import { agentOf, readTranscript } from "./openclaw-runtime.js";
import type { CompactParams, CompactResult, ContextEngine, PluginLogger, SessionParams, SessionTarget } from "./openclaw-api.js";

export const ENGINE_ID = "contextd";
export const VERSION = "0.1.0";

/**
 * The OpenClaw context engine whose every lifecycle method is a call to contextd's SessionService.
 * contextd owns the transcript the model sees and its compaction; OpenClaw keeps its own
 * transcript too, which is what lets the agent keep answering while contextd is away:
 *
 * - assemble: contextd's context (catching up first on turns it missed, see catch-up.ts); when
 *   contextd cannot be reached, OpenClaw's own history, unchanged, with a warning.
 * - commitTurn (how OpenClaw 2026.9.x hands over each accepted turn): AppendMessages with the
 *   turn's advancement key as the idempotency key, so OpenClaw's retries land once. When contextd
 *   cannot be reached it throws: OpenClaw keeps the turn in its outbox and commits it again before
 *   the next turn (which, until then, runs on OpenClaw's built-in engine).
 * - compact: contextd's Compact, OpenClaw's abort signal as cancellation and the safety timeout as
 *   the deadline.
 */
export function createEngine(cx: ContextdClient, config: PluginConfig, log: PluginLogger): ContextEngine {
  const ref = (sessionId: string, sessionKey?: string, target?: SessionTarget): SessionRef => ({
    sessionId,
    sessionKey: sessionKey ?? target?.sessionKey ?? "",
    agentId: config.agentId ?? target?.agentId ?? agentOf(sessionKey ?? target?.sessionKey) ?? "",
  });
  const budget = (b?: number) => (b && b > 0 ? Math.floor(b) : config.defaultTokenBudget);
  const append = async (session: SessionRef, messages: AgentMessage[], idempotencyKey: string, isHeartbeat = false) => {
    if (messages.length === 0) return { replayed: false, entryIds: [] as string[] };
    const converted = messages.map((m, i) => toContextdMessage(m, `messages[${i}]`));
    return cx.appendMessages({ session, messages: converted, idempotencyKey, isHeartbeat });
  };
  const warn = (what: string, err: unknown) => log.warn(`contextd: ${what}: ${describe(err)}`);

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
      const request = {
        session,
        tokenBudget: budget(p.tokenBudget),
        // OpenClaw's prompt is the user message it is about to send, not in the transcript yet. When
        // it passes none (assembling between tool calls), contextd uses the latest user message of
        // the session, which catch-up below has made the one OpenClaw holds.
        ...(p.prompt !== undefined ? { prompt: p.prompt } : {}),
        model: p.model ?? "",
        availableTools: p.availableTools ? [...p.availableTools] : [],
      };
      try {
        let res = await assembleOrNothing(cx, request);
        const missing = missingFromContextd(p.messages, res?.messages ?? []);
        if (missing.length > 0) {
          await append(session, missing, keyFor("catch-up", p.sessionId, missing));
          log.info(`contextd: caught up session ${p.sessionId} with ${missing.length} message(s) it had not seen`);
          res = await assembleOrNothing(cx, request);
        }
        if (!res) return { messages: p.messages, estimatedTokens: 0 };
        return {
          messages: res.messages.map(fromContextdMessage),
          estimatedTokens: res.estimatedTokens,
          systemPromptAddition: res.systemPromptAddition || undefined,
          promptAuthority: res.promptAuthority === PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW ? "preassembly_may_overflow" : "assembled",
        };
      } catch (err) {
        warn(`assemble failed, the model gets OpenClaw's own history of session ${p.sessionId}`, err);
        return { messages: p.messages, estimatedTokens: 0 };
      }
    },

    async commitTurn(p) {
      const res = await append(ref(p.sessionId, p.sessionKey, p.sessionTarget), p.messages, turnKey(p.advancementKey), p.isHeartbeat === true);
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

    compact: (p) => compact(cx, config, ref(p.sessionId, p.sessionKey, p.sessionTarget), p, budget(p.tokenBudget)),

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
