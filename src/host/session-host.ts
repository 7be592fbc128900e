import type * as S from "../contract/gen/contextd/v1/session.js";
import { withIdAndCount } from "../contract/encoded-messages.js";
import { CompactionTarget, Mode, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { pino, type Logger } from "pino";
import { BackgroundMaintenance, wantsBackgroundMaintenance } from "./background-maintenance.js";
import type { CallerContext } from "../registry/engine-dispatch.js";
import type { Router, Selection } from "../registry/router.js";
import type { HostCall } from "./host-call.js";
import type { ActiveView, SessionRecord, TranscriptStore } from "../store/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import { countingFor } from "./counting.js";
import { viewMessages } from "./active-view.js";
import { AssemblePlan } from "./assemble-plan.js";
import { StablePrefixes } from "./stable-prefix.js";
import { Bootstraps } from "./bootstraps.js";
import type { Compactions } from "./compactions.js";
import { checkCompaction } from "./engine-answers.js";
import { runtimeSettings } from "./runtime-settings.js";
import { sessionNotFound, type AdmittedSession, type SessionView } from "./session-visibility.js";
import { appendDigest } from "./append-digest.js";
import { NO_OBSERVER, type HostObserver } from "./host-observer.js";
import { checkIdempotencyKey, checkMessageKeys, checkPromptCache, requireBudget, requireEnum, validateAppend, type AppendLimits } from "./validate.js";

/** Time kept back from the runtime's deadline to answer an append after the engine's ingest. */
const INGEST_ANSWER_MARGIN_MS = 250;

/**
 * The session lifecycle for runtimes: append, assemble (with auto-compaction), compact, after-turn
 * and maintenance. Every engine call goes through the router, so whether `legacy` or a sidecar
 * serves it is decided in one place.
 */
export class SessionHost {
  constructor(
    readonly store: TranscriptStore,
    private readonly tokenizer: Tokenizer,
    readonly router: Router,
    private readonly compactions: Compactions,
    private readonly limits: AppendLimits,
    private readonly observer: HostObserver = NO_OBSERVER,
    private readonly bootstraps: Bootstraps = new Bootstraps(router),
    log: Logger = pino({ level: "silent" }),
  ) {
    this.background = new BackgroundMaintenance((session, signal) => this.maintainInBackground(session, signal), log);
    this.plan = new AssemblePlan({
      router,
      compactions,
      tokenizer,
      store,
      stablePrefixes: new StablePrefixes(),
      readView: (session) => this.readView(session),
      compact: (req, call, session) => this.compact(req, call, this.reread(session)),
    });
  }

  private readonly plan: AssemblePlan;
  /** Maintain after the turn, for engines that ask for it (background-maintenance.ts); contextd stops it on shutdown. */
  readonly background: BackgroundMaintenance;

  /** NOT_FOUND unless the session exists; reads only the session row, never its history. */
  async requireExists(session: SessionRef): Promise<SessionRecord> {
    const record = await this.store.getSession(session.sessionId);
    if (!record) throw sessionNotFound(session.sessionId);
    return record;
  }

  /** The session's active view (a re-read within a call whose session is already resolved). */
  async readView(session: SessionRef): Promise<ActiveView> {
    const view = await this.store.readActiveView(session.sessionId);
    if (!view) throw sessionNotFound(session.sessionId);
    return view;
  }

  /**
   * A session this call admitted already, as a `view` session again (an Assemble's overflow
   * compaction): its read is a plain re-read, as the session was admitted on the first.
   */
  private reread(session: AdmittedSession): SessionView {
    return { claimed: session, read: async () => ({ session, view: await this.readView(session) }) };
  }

  /**
   * Stores the messages (all or nothing, durable), then lets the engine ingest them. With an
   * idempotency key, a repeat of an answered request answers the same ids and reaches neither the
   * store nor the engine again (append-digest.ts says what "the same request" means).
   */
  async appendMessages(req: S.AppendMessagesRequest, call: HostCall, session: AdmittedSession): Promise<S.AppendMessagesResponse> {
    const key = checkIdempotencyKey(req.idempotencyKey);
    validateAppend(req.messages, this.limits);
    const messageKeys = checkMessageKeys(req.messageKeys, req.messages.length);
    // Off the event loop, fairly between agents, and dropped if the runtime goes away (count-pool.ts).
    const tokenCounts = await this.tokenizer.countMessages(req.messages, countingFor(call, session.agentId));
    // Runtimes do not choose entry ids; the copy keeps the bytes it was received as (received-messages.ts).
    const counted = req.messages.map((message, i) => ({
      message: withIdAndCount(message, "", message.tokenCount),
      tokenCount: tokenCounts[i],
      ...(messageKeys?.[i] ? { key: messageKeys[i] } : {}),
    }));
    const labels = { sessionKey: session.sessionKey, agentId: session.agentId };
    const requestKey = key ? { key, requestHash: appendDigest(req.messages, req.isHeartbeat, messageKeys) } : undefined;
    let stored;
    let answer: Pick<S.AppendMessagesResponse, "entryIds" | "tokenCounts" | "heldIndexes">;
    if (messageKeys) {
      // Messages the session already holds by key are not stored again, nor ingested again.
      const outcome = await this.store.appendKeyed(session.sessionId, counted, labels, requestKey, this.limits.maxSessionEntries);
      if (outcome.replayed) return { entryIds: outcome.entryIds, tokenCounts: outcome.tokenCounts, replayed: true, heldIndexes: [] };
      stored = outcome.entries;
      answer = { entryIds: outcome.entryIds, tokenCounts: outcome.tokenCounts, heldIndexes: outcome.held };
    } else {
      if (requestKey) {
        const outcome = await this.store.appendIdempotent(session.sessionId, counted, labels, requestKey, this.limits.maxSessionEntries);
        if (outcome.replayed) return { entryIds: outcome.entryIds, tokenCounts: outcome.tokenCounts, replayed: true, heldIndexes: [] };
        stored = outcome.entries;
      } else {
        stored = await this.store.appendMessages(session.sessionId, counted, labels, this.limits.maxSessionEntries);
      }
      answer = { entryIds: stored.map((e) => e.id), tokenCounts: counted.map((c) => c.tokenCount), heldIndexes: [] };
    }
    const storedMessages = stored.flatMap((e) => (e.entry?.$case === "message" ? [e.entry.value] : []));
    this.observer.appended(
      storedMessages.length,
      storedMessages.reduce((sum, m) => sum + m.tokenCount, 0),
    );
    if (storedMessages.length > 0) await this.ingest(session, storedMessages, req.isHeartbeat, call);
    return { ...answer, replayed: false };
  }

  /** The transcript is already durable; an engine that cannot ingest falls back and never fails the append. */
  private async ingest(session: SessionRef, messages: S.AppendMessagesRequest["messages"], isHeartbeat: boolean, call: HostCall) {
    const selection = this.router.select(session);
    // The append is already durable: the engine gets what is left of the runtime's deadline minus a
    // margin, so a slow engine can never make the runtime see a timeout for a stored append (and
    // retry it into a duplicate).
    const bounded = { ...call, deadlineMs: call.deadlineMs - INGEST_ANSWER_MARGIN_MS };
    await this.bootstraps.ensure(selection, session, bounded);
    try {
      await this.router.call(selection, "ingest", bounded, (engine, ctx) => {
        if (engine.ingestBatch && engine.info().capabilities?.ingestBatch) {
          return engine.ingestBatch({ session, messages, isHeartbeat, host: ctx.host }, ctx);
        }
        return (async () => {
          for (const message of messages) await engine.ingest({ session, message, isHeartbeat, host: ctx.host }, ctx);
          return { ingestedCount: messages.length };
        })();
      });
    } catch (err) {
      call.log.warn({ err, sessionId: session.sessionId }, "ingest failed after the append was stored");
    }
  }

  /** Fit the view, call the engine, validate, recover from overflow: the steps are in assemble-plan.ts. */
  async assemble(req: S.AssembleRequest, call: HostCall, viewed: SessionView): Promise<S.AssembleResponse> {
    const budget = requireBudget(req.tokenBudget);
    checkPromptCache(req.promptCache);
    const { session, view } = await viewed.read();
    const selection = this.router.select(session);
    await this.bootstraps.ensure(selection, session, call);
    return this.plan.run({ req, session, budget, selection, call }, view);
  }

  async compact(req: S.CompactRequest, call: HostCall, viewed: SessionView): Promise<S.CompactResponse> {
    const budget = requireBudget(req.tokenBudget);
    requireEnum(req.compactionTarget, CompactionTarget, "compaction_target");
    const { session, view } = await viewed.read();
    const selection = this.router.select(session);
    await this.bootstraps.ensure(selection, session, call);
    const messages = viewMessages(view);
    const started = performance.now();
    const routed = await this.router.call(
      selection,
      "compact",
      call,
      (engine, ctx) =>
        engine.compact(
          {
            session,
            messages,
            tokenBudget: budget,
            force: req.force,
            currentTokenCount: req.currentTokenCount,
            compactionTarget: req.compactionTarget,
            customInstructions: req.customInstructions,
            runtimeSettings: runtimeSettings(selection, budget),
            host: ctx.host,
          },
          ctx,
        ),
      (answer) => checkCompaction(answer, messages),
    );
    const answer = routed.value;
    const base = { engineId: routed.engineId, mode: routed.mode, fallbackReason: routed.fallbackReason };
    const delegated = routed.failedGrant?.delegatedCompactions.at(-1);
    if (delegated) {
      // The selected engine had its compaction committed through DelegateCompaction, then failed:
      // the session is compacted, by it. Legacy's answer was made from the view before that commit
      // and could only conflict with it, so it is not committed; the runtime hears what was.
      const reason = `compacted through DelegateCompaction by engine "${selection.selectedId}" before it failed (entry ${delegated.entryId})`;
      return { ok: true, compacted: true, reason, result: delegated.result, ...base };
    }
    if (!answer.compacted || !answer.result) {
      this.observer.compaction(routed.engineId, "nothing", view.tokens, view.tokens, (performance.now() - started) / 1000);
      return { ok: answer.ok, compacted: false, reason: answer.reason, result: undefined, ...base };
    }
    if (routed.grant?.delegatedCompactions.length) {
      // The engine delegated to HostService.DelegateCompaction, which already committed this result.
      return { ok: true, compacted: true, reason: answer.reason, result: answer.result, ...base };
    }
    const commit = await this.compactions.commit(view, answer.result, routed.engineId, (performance.now() - started) / 1000);
    if (!commit.committed) return { ok: true, compacted: false, reason: commit.reason, result: undefined, ...base };
    return { ok: true, compacted: true, reason: answer.reason, result: answer.result, ...base };
  }

  async afterTurn(req: S.AfterTurnRequest, call: HostCall, viewed: SessionView): Promise<S.AfterTurnResponse> {
    checkPromptCache(req.promptCache);
    const { session, view } = await viewed.read();
    const selection = this.router.select(session);
    const routed = await this.router.call(selection, "after_turn", call, async (engine, ctx) => {
      if (!engine.afterTurn || !engine.info().capabilities?.afterTurn) return {};
      return engine.afterTurn(
        {
          session,
          messages: viewMessages(view),
          prePromptMessageCount: req.prePromptMessageCount,
          autoCompactionSummary: req.autoCompactionSummary,
          tokenBudget: req.tokenBudget,
          runtimeSettings: runtimeSettings(selection, req.tokenBudget, "", req.promptCache),
          host: ctx.host,
        },
        ctx,
      );
    });
    // An engine that asked for its maintenance after the turn gets it once this call is answered.
    if (routed.mode === Mode.MODE_NORMAL && wantsBackgroundMaintenance(selection.target.info)) this.background.schedule(session);
    return { engineId: routed.engineId, mode: routed.mode, fallbackReason: routed.fallbackReason };
  }

  async maintain(_req: S.MaintainRequest, call: HostCall, session: AdmittedSession): Promise<S.MaintainResponse> {
    await this.requireExists(session);
    const selection: Selection = this.router.select(session);
    const routed = await this.maintainOn(selection, session, call);
    return { ...routed.value, engineId: routed.engineId, mode: routed.mode, fallbackReason: routed.fallbackReason };
  }

  /** One background maintenance run: an ordinary Maintain under the engine's own maintain deadline. */
  private async maintainInBackground(session: SessionRef, signal: AbortSignal): Promise<void> {
    const selection = this.router.select(session);
    if (!wantsBackgroundMaintenance(selection.target.info)) return;
    const deadlineMs = Date.now() + this.router.timeoutMs(selection.target.id, "maintain");
    await this.maintainOn(selection, session, { deadlineMs, signal });
  }

  private maintainOn(selection: Selection, session: SessionRef, call: CallerContext) {
    return this.router.call(selection, "maintain", call, async (engine, ctx) => {
      if (!engine.maintain || !engine.info().capabilities?.maintain) {
        return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: `engine "${engine.info().id}" has no maintenance` };
      }
      return engine.maintain({ session, runtimeSettings: runtimeSettings(selection, 0), host: ctx.host }, ctx);
    });
  }
}
