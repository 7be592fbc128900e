import { CancelledError, DeadlineExceededError, FailedPreconditionError, fieldError, InvalidArgumentError, LimitExceededError } from "../contract/errors.js";
import type * as H from "../contract/gen/contextd/v1/host.js";
import type { HostServiceService } from "../contract/gen/contextd/v1/host.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { RequestContext } from "../contract/request-context.js";
import type { Row, ServiceTable, SessionStep } from "../contract/rpc-table.js";
import { boundedText } from "../contract/quote.js";
import { TranscriptEntry, Usage } from "../contract/gen/contextd/v1/types.js";
import { chatMessages } from "../compaction/summarizer/chat-messages.js";
import type { ChatModel } from "../compaction/summarizer/create-summarizer.js";
import type { HostGrant } from "../registry/host-grants.js";
import type { TranscriptStore } from "../store/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import type { Compactions } from "./compactions.js";
import { readTranscriptPage } from "./transcript-pages.js";
import { searchTranscript } from "./transcript-search.js";
import { HOST_PAGE_KEY } from "./page-token.js";
import { SearchScope } from "../contract/gen/contextd/v1/search.js";
import { requireSession, validateMessage, type AppendLimits } from "./validate.js";
import { sessionNotFound } from "./session-visibility.js";

/** Timers fire a little early: an abort this close to the deadline is the deadline. */
const DEADLINE_SLACK_MS = 20;

/**
 * How a HostService request names its session: `granted` — the session of the engine call whose
 * host token it carries, which the token's rule checked against the request's (HostGrants.verify).
 */
export type GrantedSession = "granted";

export type HostTable = ServiceTable<typeof HostServiceService, HostGrant, "host-grant", GrantedSession>;

/**
 * HostService's session step: the request's session, which the host token covers (the
 * authorization step refused any other), validated — the handler's `session`.
 */
export const grantedSession: SessionStep<HostGrant, GrantedSession> = (_row, request) => ({
  sessions: requireSession((request as { session?: SessionRef }).session),
});

/**
 * What every HostService row states: the host token's rule, the granted session, and the deadline
 * of the engine call it belongs to (already admitted: never refused for load).
 */
const CALLBACK = { auth: "host-grant", session: "granted", deadline: "engine-call" } as const;

type Handler<Req, Res> = (req: Req, ctx: RequestContext<HostGrant>, session: SessionRef) => Promise<Res>;
const row = <Req, Res>(columns: typeof CALLBACK, handler: Handler<Req, Res>) =>
  ({ ...columns, handler }) as unknown as Row<Req, Res, HostGrant, "host-grant", GrantedSession, false>;

/**
 * HostService's table: engines call back into the host during an engine call. Every row's rule is
 * `host-grant`: the HostContext token the registry issued for that call — one engine, one session,
 * until the call's deadline, from the engine's side of the network, and only for the RPCs the engine
 * declared in EngineInfo.host_requirements. The server's authorization step (src/server/authorization.ts,
 * HostGrants.verify) checks all of it before a handler runs, and hands the handlers the grant as
 * the principal — whatever they commit is attributed to `grant.engineId`.
 */
export function hostService(
  store: TranscriptStore,
  compactions: Compactions,
  tokenizer: Tokenizer,
  limits: AppendLimits,
  /** The summarizer's chat model, when one is configured: it answers Complete. */
  model?: ChatModel,
): HostTable {
  const grantSignal = (grant: HostGrant, callerSignal: AbortSignal) =>
    AbortSignal.any([callerSignal, AbortSignal.timeout(Math.max(0, grant.expiresAtMs - Date.now()))]);

  return {
    readTranscript: row(CALLBACK, async (req: H.ReadTranscriptRequest, _ctx, session): Promise<H.ReadTranscriptResponse> => {
      if (req.activeOnly) {
        const view = await store.readActiveView(session.sessionId);
        if (!view) throw sessionNotFound(session.sessionId);
        // In the view's order: the pinned system messages from before the cut, the compaction, the rest.
        const entry = (m: (typeof view.messages)[number]) =>
          TranscriptEntry.fromPartial({ id: m.entryId, seq: m.seq, timestampMs: m.message.timestampMs, entry: { $case: "message", value: m.message } });
        const entries: TranscriptEntry[] = view.messages.slice(0, view.pinnedCount).map(entry);
        if (view.compaction) entries.push(view.compaction.entry);
        entries.push(...view.messages.slice(view.pinnedCount).map(entry));
        return { entries, nextPageToken: "" };
      }
      if (!(await store.getSession(session.sessionId))) throw sessionNotFound(session.sessionId);
      return readTranscriptPage(store, session.sessionId, req.pageSize, req.pageToken);
    }),

    // The grant's one session (no AGENT scope here: the host token covers this session only).
    searchTranscript: row(CALLBACK, async (req: H.HostServiceSearchTranscriptRequest, _ctx, session): Promise<H.HostServiceSearchTranscriptResponse> => {
      const record = await store.getSession(session.sessionId);
      if (!record) throw sessionNotFound(session.sessionId);
      const ask = { ...req, scope: SearchScope.SEARCH_SCOPE_SESSION };
      return searchTranscript(store, ask, record, { key: HOST_PAGE_KEY, rpc: "HostService.SearchTranscript" });
    }),

    rewriteTranscriptEntries: row(CALLBACK, async (req: H.RewriteTranscriptEntriesRequest, ctx, session): Promise<H.RewriteTranscriptEntriesResponse> => {
      const grant = ctx.principal;
      if (req.rewrites.length === 0) throw fieldError("rewrites", "is empty");
      if (req.rewrites.length > limits.maxMessagesPerAppend) {
        throw new LimitExceededError(`rewrites has ${req.rewrites.length} entries, over limits.max_messages_per_append (${limits.maxMessagesPerAppend})`, {
          key: "limits.max_messages_per_append",
          value: limits.maxMessagesPerAppend,
        });
      }
      req.rewrites.forEach((r, i) => {
        if (!r.entryId) throw fieldError(`rewrites[${i}].entry_id`, "is required");
        if (!r.message) throw fieldError(`rewrites[${i}].message`, "is required");
        validateMessage(r.message, `rewrites[${i}].message`, limits.maxMessageBytes);
      });
      // Counted on the pool (one rewrite can be megabytes of one BPE piece), by turns with other
      // engines' and runtimes' counts, and dropped when the engine's call ends.
      const counts = await tokenizer.countMessages(
        req.rewrites.map((r) => r.message!),
        { tenant: `engine:${grant.engineId}`, signal: ctx.signal, deadlineMs: Math.min(ctx.deadlineMs, grant.expiresAtMs) },
      );
      const outcome = await store.rewriteEntries(
        session.sessionId,
        req.rewrites.map((r, i) => ({ entryId: r.entryId, message: r.message!, tokenCount: counts[i] })),
        req.reason ? boundedText(req.reason, 1024) : `rewritten by engine "${grant.engineId}"`,
      );
      return { rewrittenEntries: outcome.rewrittenEntries, bytesFreed: outcome.bytesFreed };
    }),

    delegateCompaction: row(CALLBACK, async (req: H.DelegateCompactionRequest, ctx, session): Promise<H.DelegateCompactionResponse> => {
      const grant = ctx.principal;
      if (!req.tokenBudget) throw fieldError("token_budget", "must be greater than 0");
      const view = await store.readActiveView(session.sessionId);
      if (!view) throw sessionNotFound(session.sessionId);
      let outcome;
      try {
        outcome = await compactions.runNative(
          view,
          {
            tokenBudget: req.tokenBudget,
            target: req.compactionTarget,
            force: req.force,
            customInstructions: req.customInstructions,
            currentTokenCount: req.currentTokenCount,
            signal: grantSignal(grant, ctx.signal),
            // The engine call may end while the host compacts; then nothing may land.
            mayCommit: () => !grant.ended && Date.now() < grant.expiresAtMs,
          },
          grant.engineId,
        );
      } catch (err) {
        if (err instanceof Error && err.name === "AbortError") {
          throw new DeadlineExceededError("DelegateCompaction: the engine call's deadline passed during compaction; nothing was committed");
        }
        throw err;
      }
      if (outcome.committed && outcome.entryId && outcome.result) grant.delegatedCompactions.push({ entryId: outcome.entryId, result: outcome.result });
      // A refused compaction (no useful summary fits the budget) is a failure the engine passes on.
      return { ok: outcome.refused !== true, compacted: outcome.committed, reason: outcome.reason, result: outcome.committed ? outcome.result : undefined };
    }),

    // One completion from the summarizer's model (HostService.Complete in host.proto lists its
    // statuses). Upstream failures are ModelErrors, which carry their own status (UNAVAILABLE,
    // RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, ...).
    // Complete reads no session state: its session is the grant's, validated by the session step.
    complete: row(CALLBACK, async (req: H.CompleteRequest, ctx): Promise<H.CompleteResponse> => {
      const grant = ctx.principal;
      if (!model) throw new FailedPreconditionError("Complete needs a summarizer model, and none is configured (compaction.summarizer.kind is extractive)");
      if (req.messages.length === 0 && !req.system.trim()) throw new InvalidArgumentError("Complete needs a system prompt or at least one message");
      if (req.messages.length > limits.maxMessagesPerAppend) {
        throw new LimitExceededError(`messages has ${req.messages.length} entries, over limits.max_messages_per_append (${limits.maxMessagesPerAppend})`, {
          key: "limits.max_messages_per_append",
          value: limits.maxMessagesPerAppend,
        });
      }
      req.messages.forEach((m, i) => validateMessage(m, `messages[${i}]`, limits.maxMessageBytes));
      const endsAtMs = Math.min(grant.expiresAtMs, ctx.deadlineMs);
      const signal = Number.isFinite(ctx.deadlineMs)
        ? AbortSignal.any([grantSignal(grant, ctx.signal), AbortSignal.timeout(Math.max(0, ctx.deadlineMs - Date.now()))])
        : grantSignal(grant, ctx.signal);
      // The same hour of the model as the agent's model summaries: one model, one bill.
      model.spend.check(grant.agentId, "complete");
      try {
        const c = await model.client.complete({
          messages: chatMessages(req.system, req.messages),
          maxTokens: req.maxTokens > 0 ? Math.min(req.maxTokens, model.maxOutputTokens) : model.maxOutputTokens,
          signal,
        });
        model.spend.record(grant.agentId, "complete", c.attempts, c.usage.input + c.usage.output);
        return { text: c.text, usage: Usage.fromPartial({ input: c.usage.input, output: c.usage.output, total: c.usage.total }) };
      } catch (err) {
        if (err instanceof Error && err.name === "AbortError") {
          if (Date.now() >= endsAtMs - DEADLINE_SLACK_MS)
            throw new DeadlineExceededError("Complete: the engine call's deadline passed before the model answered");
          throw new CancelledError("Complete: cancelled by the caller before the model answered");
        }
        throw err;
      }
    }),
  };
}
