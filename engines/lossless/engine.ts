/**
 * The `lossless` context engine: the ContextEngineService methods, wired to the store, the sync,
 * the summary DAG and the compactor. Serve it with `serveEngine(new LosslessEngine(store))`
 * (main.ts does, from the environment).
 *
 * It owns compaction (`owns_compaction: true`): the host never compacts for it. Assemble compacts
 * first when the session does not fit the budget, then fits summaries + fresh tail into it;
 * Compact grows the DAG to the target and answers a result the host can commit (host-commit.ts).
 * Every method catches up with the host's transcript first (sync.ts) and runs under a per-session
 * lock; long work checks the call's signal between steps and stops early before its deadline.
 */
import {
  CompactionTarget,
  InvalidArgumentError,
  PromptAuthority,
  type BootstrapRequest,
  type BootstrapResponse,
  type ContextEngineServiceAfterTurnRequest,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type ContextEngineServiceMaintainRequest,
  type ContextEngineServiceMaintainResponse,
  type DeepPartial,
  type EngineCallContext,
  type EngineDefinition,
  type EngineInfoInput,
  type ForgetSessionRequest,
  type ForgetSessionResponse,
  type IngestBatchRequest,
  type IngestBatchResponse,
  type IngestRequest,
  type IngestResponse,
  type Message,
  type SessionRef,
} from "contextd/engine-sdk";
import { createTokenizer } from "../../src/tokens/index.js";
import type { Tokenizer } from "../../src/tokens/index.js";
import { planContext } from "./assembler.js";
import { Compactor, type CompactGoal, type CompactReport } from "./compactor.js";
import { promptBudget, resolveLosslessOptions, type LosslessOptions } from "./config.js";
import { SummaryDag } from "./dag.js";
import { answerForHost } from "./host-commit.js";
import { hostKeptPart, isSystem } from "./pinned.js";
import { summaryMessage } from "./render.js";
import { SessionLock } from "./session-lock.js";
import type { LosslessStore } from "./store.js";
import { SummaryWriter, type SummarizeCall } from "./summarizer.js";
import { TranscriptSync } from "./sync.js";
import { sumTokens } from "./types.js";

export const LOSSLESS_ENGINE_ID = "lossless";
export const LOSSLESS_VERSION = "1.0.0";

/** Compaction inside a call stops starting new steps this long before the call's deadline. */
const DEADLINE_MARGIN_MS = 1_000;

function sessionIdOf(session: SessionRef | undefined): string {
  const id = session?.sessionId?.trim();
  if (!id) throw new InvalidArgumentError("session.session_id is required");
  return id;
}

export class LosslessEngine implements EngineDefinition {
  readonly info: EngineInfoInput = {
    id: LOSSLESS_ENGINE_ID,
    name: "Lossless DAG context (summaries over verbatim history)",
    version: LOSSLESS_VERSION,
    ownsCompaction: true,
    // llm-complete: leaf and condensed summaries come from HostService.Complete (options.useHostModel),
    // which contextd refuses to an engine that did not declare it.
    hostRequirements: ["assemble-before-prompt", "llm-complete"],
  };
  readonly options: LosslessOptions;
  private readonly tokenizer: Tokenizer;
  private readonly sync: TranscriptSync;
  private readonly compactor: Compactor;
  private readonly locks = new SessionLock();

  constructor(
    readonly store: LosslessStore,
    options: Partial<LosslessOptions> = {},
    tokenizer: Tokenizer = createTokenizer("o200k_base"),
  ) {
    this.options = resolveLosslessOptions(options);
    this.tokenizer = tokenizer;
    this.sync = new TranscriptSync(store, tokenizer);
    const writer = new SummaryWriter({
      leafChars: this.options.leafSummaryChars,
      condensedChars: this.options.condensedSummaryChars,
      useHostModel: this.options.useHostModel,
    });
    const dag = new SummaryDag({ store, writer, tokenizer, fanout: this.options.fanout });
    this.compactor = new Compactor(store, dag, this.options);
  }

  async bootstrap(req: BootstrapRequest, ctx: EngineCallContext): Promise<DeepPartial<BootstrapResponse>> {
    const sessionId = sessionIdOf(req.session);
    return this.locks.run(sessionId, ctx.signal, async () => {
      if (!ctx.host) return { bootstrapped: false, reason: "Bootstrap carried no HostContext, so the transcript cannot be read" };
      const imported = await this.sync.importTranscript(sessionId, ctx.host);
      const stored = this.store.messageCount(sessionId);
      return { bootstrapped: true, importedMessages: imported, reason: `imported ${imported} new message(s); ${stored} stored` };
    });
  }

  /** Purges everything kept of a deleted session, after the calls on it in flight (the session lock). */
  async forgetSession(req: ForgetSessionRequest, ctx: EngineCallContext): Promise<DeepPartial<ForgetSessionResponse>> {
    const sessionId = sessionIdOf(req.session);
    return this.locks.run(sessionId, ctx.signal, async () => ({ purged: this.store.forget(sessionId) }));
  }

  async ingest(req: IngestRequest, ctx: EngineCallContext): Promise<DeepPartial<IngestResponse>> {
    const count = await this.ingestMessages(req.session, req.message ? [req.message] : [], ctx);
    return { ingested: count > 0 };
  }

  async ingestBatch(req: IngestBatchRequest, ctx: EngineCallContext): Promise<DeepPartial<IngestBatchResponse>> {
    return { ingestedCount: await this.ingestMessages(req.session, req.messages, ctx) };
  }

  /** Stores the messages (idempotent on entry id); returns how many of them are stored now. */
  private async ingestMessages(session: SessionRef | undefined, messages: Message[], ctx: EngineCallContext): Promise<number> {
    const sessionId = sessionIdOf(session);
    return this.locks.run(sessionId, ctx.signal, async () => {
      await this.sync.catchUp(sessionId, ctx);
      const conversation = messages.map((m) => this.sync.conversational(m)).filter((m): m is Message => m !== undefined);
      this.store.append(sessionId, conversation);
      return conversation.length;
    });
  }

  async assemble(req: ContextEngineServiceAssembleRequest, ctx: EngineCallContext): Promise<DeepPartial<ContextEngineServiceAssembleResponse>> {
    const sessionId = sessionIdOf(req.session);
    return this.locks.run(sessionId, ctx.signal, async () => {
      await this.sync.catchUp(sessionId, ctx, req.messages);
      const budget = req.tokenBudget ?? Number.POSITIVE_INFINITY;
      if (Number.isFinite(budget) && this.compactor.size(sessionId) > budget) {
        const report = await this.runCompaction(sessionId, { kind: "budget", target: promptBudget(budget, this.options.reserveTokens) }, false, ctx);
        ctx.log.info({ sessionId, ...report }, "compacted before assembling");
      }
      return this.render(sessionId, budget);
    });
  }

  /**
   * Every system message first (pinned.ts), then root summaries and the fresh tail fitted to what
   * they leave of `budget` (assembler.ts).
   */
  private render(sessionId: string, budget: number): DeepPartial<ContextEngineServiceAssembleResponse> {
    const roots = this.store.roots(sessionId);
    const raw = this.store.rawMessages(sessionId).filter((m) => !isSystem(m));
    const pinnedTokens = sumTokens(this.store.systemMessages(sessionId));
    const plan = planContext({ summaries: roots, raw, budget: Math.max(0, budget - pinnedTokens) });
    const messages: Message[] = [...this.store.systemMessageBodies(sessionId), ...roots.slice(plan.firstSummary).map(summaryMessage)];
    for (const [start, end] of plan.segments) {
      if (end <= start) continue;
      messages.push(...this.store.messageBodies(sessionId, raw[start].ord, raw[end - 1].ord).filter((m) => !isSystem(m)));
    }
    const estimatedTokens = plan.tokens + pinnedTokens;
    return {
      messages,
      estimatedTokens,
      promptAuthority:
        plan.overflow || estimatedTokens > budget ? PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW : PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED,
    };
  }

  async compact(req: ContextEngineServiceCompactRequest, ctx: EngineCallContext): Promise<DeepPartial<ContextEngineServiceCompactResponse>> {
    const sessionId = sessionIdOf(req.session);
    const threshold = req.compactionTarget === CompactionTarget.COMPACTION_TARGET_THRESHOLD;
    if (!threshold && !(req.tokenBudget > 0)) throw new InvalidArgumentError("token_budget must be greater than 0 for a BUDGET compaction");
    return this.locks.run(sessionId, ctx.signal, async () => {
      await this.sync.catchUp(sessionId, ctx, req.messages);
      const target = threshold ? ("threshold" as const) : promptBudget(req.tokenBudget, this.options.reserveTokens);
      const goal: CompactGoal = target === "threshold" ? { kind: "threshold" } : { kind: "budget", target };
      const report = await this.runCompaction(sessionId, goal, req.force, ctx, req.customInstructions);
      // The host's view: its pinned system messages, its summary, then what lines up with our raw tail.
      const { head, kept } = hostKeptPart(req.messages);
      const view = kept.map((m) => this.sync.conversational(m)).filter((m): m is Message => m !== undefined);
      const answer = await answerForHost(this.store, this.compactor, this.tokenizer, {
        sessionId,
        view,
        hostPinnedTokens: sumTokens(head),
        tokensBefore: req.currentTokenCount || sumTokens(req.messages),
        report,
        target,
        call: this.summarizeCall(ctx, req.customInstructions),
      });
      ctx.log.info({ sessionId, compacted: answer.compacted, reason: answer.reason }, "compact");
      return { ok: true, ...answer };
    });
  }

  /** Keeps the session within the turn's budget right after the turn, so the next Assemble is quick. */
  async afterTurn(req: ContextEngineServiceAfterTurnRequest, ctx: EngineCallContext): Promise<void> {
    const sessionId = sessionIdOf(req.session);
    await this.locks.run(sessionId, ctx.signal, async () => {
      await this.sync.catchUp(sessionId, ctx, req.messages);
      if (req.tokenBudget > 0 && this.compactor.size(sessionId) > req.tokenBudget) {
        await this.runCompaction(sessionId, { kind: "budget", target: promptBudget(req.tokenBudget, this.options.reserveTokens) }, false, ctx);
      }
    });
  }

  /** Reports the session's DAG (nothing to clean up: the engine never deletes). */
  async maintain(req: ContextEngineServiceMaintainRequest, ctx: EngineCallContext): Promise<DeepPartial<ContextEngineServiceMaintainResponse>> {
    const sessionId = sessionIdOf(req.session);
    return this.locks.run(sessionId, ctx.signal, async () => {
      await this.sync.catchUp(sessionId, ctx);
      const s = this.store.stats(sessionId);
      return {
        changed: false,
        reason: `${s.messages} messages stored (${s.summarizedMessages} summarized), ${s.summaries} summaries, ${s.roots} top-level, depth ≤ ${s.maxDepth}`,
      };
    });
  }

  private runCompaction(sessionId: string, goal: CompactGoal, force: boolean, ctx: EngineCallContext, customInstructions = ""): Promise<CompactReport> {
    return this.compactor.run({
      sessionId,
      goal,
      force,
      softDeadlineMs: ctx.deadlineMs - DEADLINE_MARGIN_MS,
      call: this.summarizeCall(ctx, customInstructions),
    });
  }

  private summarizeCall(ctx: EngineCallContext, customInstructions = ""): SummarizeCall {
    return { host: ctx.host, signal: ctx.signal, deadlineMs: ctx.deadlineMs, customInstructions: customInstructions || undefined, log: ctx.log };
  }
}
