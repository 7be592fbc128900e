import type * as S from "../contract/gen/contextd/v1/session.js";
import type { ContextEngineServiceAssembleResponse } from "../contract/gen/contextd/v1/engine.js";
import { CompactionTarget, Mode, PromptAuthority, type CompactionResult, type Message, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { LEGACY_ENGINE_ID } from "../registry/legacy-engine.js";
import type { Routed, Router, Selection } from "../registry/router.js";
import type { ActiveView, TranscriptStore } from "../store/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import { latestUserText, viewMessages } from "./active-view.js";
import type { Compactions } from "./compactions.js";
import { compactWhileCold } from "./cold-cache.js";
import { countingFor } from "./counting.js";
import { checkAssembled, checkProjection, resolveKeptEntries } from "./engine-answers.js";
import { runtimeSettings } from "./runtime-settings.js";
import type { HostCall } from "./host-call.js";
import type { StablePrefixes } from "./stable-prefix.js";
import type { AdmittedSession } from "./session-visibility.js";

/**
 * An Assemble, as a plan of named steps (SessionHost.assemble runs it):
 *
 * 1. **fit** — for an engine that does not own compaction (legacy included, also when it answers as
 *    the fallback), the host compacts the view natively until it fits the budget: at most
 *    MAX_OVERFLOW_COMPACTIONS attempts, a conflicting commit re-reads the view and tries again.
 * 2. **call the engine** — through the router (deadline, bulkhead, fallback to legacy), with the
 *    view as it is after step 1 for the engine that answers.
 * 3. **validate** — an engine's answer by reference is made whole, what it made itself is counted
 *    (on the counting pool, within the engine call's deadline) and checked against the budget it
 *    was given; legacy's answer is the host's own and trusted.
 * 4. **recover from overflow** — an engine that owns compaction and answers "may overflow" over the
 *    budget gets its own Compact, then is asked again (steps 2–3), at most MAX_OVERFLOW_COMPACTIONS
 *    times; still over, the answer is DEGRADED and says why.
 * 5. **answer** — the system prompt addition counted (and its count stored when it changed), the
 *    stable prompt prefix measured against the session's previous answer, the response built.
 *
 * Each step takes the state it works on and returns the next one ({@link Fitted}, {@link Assembled});
 * nothing is kept between steps but what they return.
 */

/** An overflow compaction is tried at most this many times per Assemble. */
export const MAX_OVERFLOW_COMPACTIONS = 3;

/** What one Assemble is for: the request, the session it names (resolved), its budget and selection. */
export interface AssembleInput {
  req: S.AssembleRequest;
  session: AdmittedSession;
  budget: number;
  selection: Selection;
  call: HostCall;
}

/** The view an engine is sent, and the latest compaction this Assemble committed to make it. */
export interface Fitted {
  view: ActiveView;
  compaction?: CompactionResult;
  /** Step 1 ran on this view: it fits the budget, or native compaction could do no more. */
  fitted: boolean;
}

/** An engine's answer with the host's count of it, and the view it was made from. */
export interface Assembled {
  answer: ContextEngineServiceAssembleResponse;
  /** The host's count of the answer's messages (for legacy, the engine's own, which is the host's). */
  estimatedTokens: number;
  /** The host's count of one of the answer's messages. */
  tokensOf: (m: Message) => number;
  from: Fitted;
}

export interface AssemblePlanDeps {
  router: Router;
  compactions: Compactions;
  tokenizer: Tokenizer;
  store: Pick<TranscriptStore, "setSystemAdditionTokens">;
  /** Each session's previous answer, for AssembleResponse.stable_prefix_messages. */
  stablePrefixes: StablePrefixes;
  /** Re-reads the session's active view (after a compaction). */
  readView(session: SessionRef): Promise<ActiveView>;
  /**
   * The selected engine's own Compact (SessionHost.compact) of the session this Assemble admitted:
   * overflow recovery for engines that own compaction.
   */
  compact(req: S.CompactRequest, call: HostCall, session: AdmittedSession): Promise<S.CompactResponse>;
}

export class AssemblePlan {
  constructor(private readonly deps: AssemblePlanDeps) {}

  async run(input: AssembleInput, view: ActiveView): Promise<S.AssembleResponse> {
    const autoCompact = input.req.autoCompact ?? true;
    let from: Fitted = { view, fitted: false };
    // Fitted before the engine call, under the runtime's deadline: what it commits is reported
    // whatever happens to the call, and the engine's share of the deadline is not spent on it.
    if (autoCompact && !input.selection.target.info.ownsCompaction) from = await this.fit(input, from, input.call.signal);
    let routed = await this.callEngine(input, from, autoCompact);
    for (let attempt = 0; autoCompact && attempt < MAX_OVERFLOW_COMPACTIONS && overflowing(routed, input.budget); attempt++) {
      const recovered = await this.recoverOverflow(input);
      if (!recovered) break;
      routed = await this.callEngine(input, recovered, autoCompact);
    }
    return this.answer(input, routed, autoCompact);
  }

  /**
   * Step 1: the host's native compaction until the view fits the budget (or can do no more). First,
   * cache-aware: a view that fits but is near the budget (`compaction.cold_cache_compact_ratio`) is
   * compacted now when the runtime says its prompt cache is cold (cold-cache.ts) — rewriting the
   * prompt then costs no cache, where the compaction it would need a few calls later might fall on
   * a warm cache.
   */
  async fit(input: AssembleInput, from: Fitted, signal: AbortSignal | undefined): Promise<Fitted> {
    const { session, budget, call } = input;
    let { view, compaction } = from;
    const native = (force: boolean) =>
      this.deps.compactions.runNative(
        view,
        {
          tokenBudget: budget,
          target: CompactionTarget.COMPACTION_TARGET_BUDGET,
          force,
          signal,
          away: call.away,
          counting: { ...countingFor(call, session.agentId), signal },
        },
        LEGACY_ENGINE_ID,
      );
    if (compactWhileCold(input.req.promptCache, view.tokens, budget, this.deps.compactions.settings.coldCacheCompactRatio ?? 0, Date.now())) {
      const outcome = await native(true);
      if (outcome.committed) compaction = outcome.result;
      if (outcome.committed || outcome.conflict) view = await this.deps.readView(session);
    }
    for (let attempt = 0; attempt < MAX_OVERFLOW_COMPACTIONS && view.tokens > budget; attempt++) {
      const outcome = await native(false);
      if (!outcome.conflict && !outcome.committed) break;
      if (outcome.committed) compaction = outcome.result;
      view = await this.deps.readView(session);
    }
    return { view, ...(compaction ? { compaction } : {}), fitted: true };
  }

  /** Steps 2 and 3: the engine's answer through the router, made whole, counted and checked. */
  callEngine(input: AssembleInput, from: Fitted, autoCompact: boolean): Promise<Routed<Assembled>> {
    const { req, session, budget, selection, call } = input;
    return this.deps.router.call(selection, "assemble", call, async (engine, ctx, target) => {
      // The fallback (or a selection renewed by the router) may be an engine the view was not fitted for.
      const fitted = autoCompact && !target.info.ownsCompaction && !from.fitted ? await this.fit(input, from, ctx.signal) : from;
      const sent = viewMessages(fitted.view);
      const answer = await engine.assemble(
        {
          session,
          messages: sent,
          tokenBudget: budget,
          availableTools: req.availableTools,
          model: req.model,
          prompt: req.prompt ?? latestUserText(sent),
          runtimeSettings: runtimeSettings(selection, budget, req.model, req.promptCache),
          host: ctx.host,
        },
        ctx,
      );
      if (target.builtin) return { answer, estimatedTokens: answer.estimatedTokens, tokensOf: this.storedCount, from: fitted };
      const count = await this.hostCount(input, answer, sent, { signal: ctx.signal, deadlineMs: ctx.deadlineMs });
      checkProjection(answer.contextProjection);
      return { answer, estimatedTokens: checkAssembled(answer, budget, count), tokensOf: count, from: fitted };
    });
  }

  /**
   * Step 3's count: an answer by reference made whole, the messages the view holds counted as
   * stored, the rest counted on the pool within the engine call's deadline (an answer of megabytes,
   * bounded by engines.answer_limits, never runs BPE on the event loop).
   */
  private async hostCount(
    input: AssembleInput,
    answer: ContextEngineServiceAssembleResponse,
    sent: Message[],
    within: { signal: AbortSignal; deadlineMs: number },
  ): Promise<(m: Message) => number> {
    resolveKeptEntries(answer, sent);
    const stored = new Map(sent.map((m) => [m.id, m.tokenCount]));
    const fresh = answer.messages.filter((m) => !(m.id && stored.get(m.id)));
    const counts = await this.deps.tokenizer.countMessages(fresh, countingFor({ ...input.call, ...within }, input.session.agentId));
    const counted = new Map(fresh.map((m, i) => [m, counts[i]]));
    return (m) => (m.id && stored.get(m.id)) || (counted.get(m) ?? this.deps.tokenizer.countMessage(m));
  }

  /** Legacy answers with the view's messages, which carry the host's stored counts. */
  private readonly storedCount = (m: Message): number => m.tokenCount || this.deps.tokenizer.countMessage(m);

  /** Step 4: the engine's own Compact; the re-read view it leaves, or undefined when nothing was compacted. */
  async recoverOverflow(input: AssembleInput): Promise<Fitted | undefined> {
    const compacted = await this.deps.compact(
      {
        session: input.session,
        tokenBudget: input.budget,
        force: true,
        compactionTarget: CompactionTarget.COMPACTION_TARGET_BUDGET,
        customInstructions: "",
        currentTokenCount: 0,
      },
      input.call,
      input.session,
    );
    if (!compacted.compacted) return undefined;
    return { view: await this.deps.readView(input.session), ...(compacted.result ? { compaction: compacted.result } : {}), fitted: false };
  }

  /** Step 5: the response, DEGRADED when the answer is still over the budget. */
  async answer(input: AssembleInput, routed: Routed<Assembled>, autoCompact: boolean): Promise<S.AssembleResponse> {
    const { session, budget, call } = input;
    const { answer, estimatedTokens, tokensOf, from } = routed.value;
    let mode = routed.mode;
    let fallbackReason = routed.fallbackReason;
    if (overBudget(routed.value, budget)) {
      mode = Mode.MODE_DEGRADED;
      fallbackReason ||= autoCompact
        ? `context is ${estimatedTokens} tokens, over token_budget ${budget} after ${MAX_OVERFLOW_COMPACTIONS} compaction attempts`
        : `context is ${estimatedTokens} tokens, over token_budget ${budget}, and auto_compact is off`;
    }
    const additionTokens = answer.systemPromptAddition
      ? await this.deps.tokenizer.countTextAsync(answer.systemPromptAddition, countingFor(call, session.agentId))
      : 0;
    if (additionTokens !== from.view.session.systemAdditionTokens) await this.deps.store.setSystemAdditionTokens(session.sessionId, additionTokens);
    const stable = this.deps.stablePrefixes.measure(session.sessionId, answer.systemPromptAddition, answer.messages, tokensOf);
    return {
      messages: answer.messages,
      estimatedTokens,
      systemPromptAddition: answer.systemPromptAddition,
      engineId: routed.engineId,
      mode,
      fallbackReason,
      compaction: from.compaction,
      promptAuthority: answer.promptAuthority || PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED,
      stablePrefixMessages: stable.messages,
      stablePrefixTokens: stable.tokens,
      ...(answer.contextProjection ? { contextProjection: answer.contextProjection } : {}),
    };
  }
}

/** An engine other than legacy (which is the host's own compaction) answered over the budget, as it said it may. */
function overflowing(routed: Routed<Assembled>, budget: number): boolean {
  return routed.engineId !== LEGACY_ENGINE_ID && overBudget(routed.value, budget);
}

/** Over the budget, by an answer whose engine said it may overflow (any other answer over it failed step 3). */
function overBudget(a: Assembled, budget: number): boolean {
  return a.answer.promptAuthority === PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW && a.estimatedTokens > budget;
}
