import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import { LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { CancelledError, ContractViolation, DeadlineExceededError, EngineFailedError, ThrottledError } from "../contract/errors.js";
import { boundedText } from "../contract/quote.js";
import { status } from "@grpc/grpc-js";
import { Mode, SelectionSource, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { Bulkhead } from "./bulkhead.js";
import { withDeadline } from "./deadline.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import { EngineRevokedError, type HostGrant, type HostGrants } from "./host-grants.js";

export type EngineOperation = "ingest" | "assemble" | "compact" | "after_turn" | "maintain" | "bootstrap" | "subagent";
export type OnFailure = "fallback" | "strict";

export interface RoutingSettings {
  contextEngine: string;
  agents: Record<string, string>;
  timeoutsMs: Record<EngineOperation, number>;
  onFailure: OnFailure;
  /** The bulkhead: calls in flight to one sidecar at most (bulkhead.ts). */
  maxConcurrentCalls: number;
  /**
   * Kept back from the runtime's deadline for legacy's answer when a sidecar call may fall back
   * (never more than half of what is left): a hung engine must not use the whole deadline.
   */
  fallbackReserveMs: number;
  overrides: Record<string, { timeoutsMs?: Partial<Record<EngineOperation, number>>; onFailure?: OnFailure; maxConcurrentCalls?: number }>;
}

/** Which engine serves a session, and whether that is the one the slot asked for. */
export interface Selection {
  session: SessionRef;
  /** The engine id the slot names for this session. */
  selectedId: string;
  source: SelectionSource;
  /** The engine that will be called: the selected one, or `legacy` when it is unusable. */
  target: RegisteredEngine;
  mode: Mode;
  fallbackReason: string;
  /** Why the selected engine is not the target (FALLBACK selections only). */
  fallbackKind?: FallbackKind;
}

export interface Routed<T> {
  value: T;
  engineId: string;
  mode: Mode;
  fallbackReason: string;
  /** The host grant of the call that answered (remote engines only). */
  grant?: HostGrant;
  /**
   * On a fallback after the selected engine failed: that engine's grant. Its HostService callbacks
   * may have committed something before it failed (a delegated compaction), which the answer must
   * not contradict.
   */
  failedGrant?: HostGrant;
}

/** What the runtime's own call contributes: its deadline (Infinity when none), cancellation and trace context. */
export interface CallerContext {
  deadlineMs: number;
  signal?: AbortSignal;
  /** The W3C trace context to continue in the engine call (`traceparent`, `tracestate`). */
  trace?: Record<string, string>;
  /**
   * Runs a wait outside contextd (a sidecar's answer, a model's): the caller's tenant gives its turn
   * at doing work up meanwhile (src/contract/tenant-limits.ts). Passed to engines as CallContext.away.
   */
  away?: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * How an engine call ended, for metrics: the failure kinds, the caller's cancellation, `short` (it
 * ran out of the share of a short runtime deadline it was given, not its own deadline), `revoked`
 * (its engine was quarantined or deregistered while it ran), or ok.
 */
export type EngineCallOutcome = "ok" | FailureKind | "cancelled" | "short" | "revoked";

/**
 * Why a call was answered by `legacy` instead of the selected engine (a bounded set: a metric label
 * and EngineStatus.fallbacks_by_reason key): the engine was not registered or quarantined when the
 * call was routed, it failed (error, timeout, contract), its bulkhead was full (rejected), or it
 * did not answer within its share of the runtime's own, shorter deadline (short).
 */
export type FallbackKind = FailureKind | "not_registered" | "quarantined" | "rejected" | "short";

/**
 * Told about every engine call, for metrics and tracing (src/server/observability): `around` runs
 * the call — a tracer wraps it in a span and hands back the trace context the engine continues —
 * and `finished` hears how it ended; `fallback` hears of every call answered by `legacy` instead of
 * the selected engine. The router works without them.
 */
export interface EngineCallHooks {
  around<T>(
    engineId: string,
    op: EngineOperation,
    trace: Record<string, string> | undefined,
    call: (trace: Record<string, string> | undefined) => Promise<T>,
  ): Promise<T>;
  finished(engineId: string, op: EngineOperation, outcome: EngineCallOutcome, seconds: number): void;
  fallback(selectedId: string, op: EngineOperation, kind: FallbackKind): void;
}

/** Why an engine call did not produce a usable answer. */
export type FailureKind = "error" | "timeout" | "contract";

/** Told about every engine failure that is the engine's fault (never the caller's cancellation). */
export interface FailureObserver {
  onEngineFailure(engine: RegisteredEngine, op: EngineOperation, kind: FailureKind, reason: string): void;
  onFallback(engine: RegisteredEngine, op: EngineOperation, reason: string): void;
  /** A call was not sent because the engine is at its concurrency limit (not a failure: no quarantine). */
  onRejected(engine: RegisteredEngine, op: EngineOperation, reason: string): void;
}

/** Timers fire a little early or late; a deadline this close counts as reached. */
const CLOCK_SLACK_MS = 5;

/** The runtime's own deadline ran out during an engine call: the caller's doing, not the engine's. */
export class CallerDeadlineError extends DeadlineExceededError {}

/**
 * The engine ran out of its share of the runtime's deadline (that deadline less the fallback
 * reserve), which was shorter than its own configured deadline: the runtime's tight deadline, not
 * the engine's fault — it is not quarantined for it (one tenant's short deadlines must not eject an
 * engine every tenant uses), but this call falls back to `legacy` in the reserve.
 */
export class ShortDeadlineError extends DeadlineExceededError {}

/**
 * Routes engine calls: resolves the slot, bounds every call with its deadline, and falls back to
 * `legacy` within what is left of the runtime's deadline when the selected engine fails.
 */
export class Router {
  private readonly bulkhead: Bulkhead;

  constructor(
    private readonly registry: EngineRegistry,
    private readonly settings: RoutingSettings,
    private readonly grants: HostGrants,
    private readonly observer?: FailureObserver,
    private readonly hooks?: EngineCallHooks,
  ) {
    this.bulkhead = new Bulkhead((id) => this.settings.overrides[id]?.maxConcurrentCalls ?? this.settings.maxConcurrentCalls);
  }

  select(session: SessionRef): Selection {
    const agentId = session.agentId;
    const perAgent = agentId ? this.settings.agents[agentId] : undefined;
    const selectedId = perAgent ?? this.settings.contextEngine;
    const source = perAgent || selectedId !== LEGACY_ENGINE_ID ? SelectionSource.SELECTION_SOURCE_CONFIGURED : SelectionSource.SELECTION_SOURCE_DEFAULT;
    const legacy = this.registry.legacy;
    const engine = this.registry.get(selectedId);
    const fallback = (reason: string, fallbackKind: FallbackKind): Selection => ({
      session,
      selectedId,
      source,
      target: legacy,
      mode: Mode.MODE_FALLBACK,
      fallbackReason: reason,
      fallbackKind,
    });
    if (!engine) return fallback(`engine "${selectedId}" is not registered`, "not_registered");
    if (engine.quarantine) {
      return fallback(`engine "${selectedId}" is quarantined (${engine.quarantine.operation}: ${engine.quarantine.reason})`, "quarantined");
    }
    return { session, selectedId, source, target: engine, mode: Mode.MODE_NORMAL, fallbackReason: "" };
  }

  timeoutMs(engineId: string, op: EngineOperation): number {
    return this.settings.overrides[engineId]?.timeoutsMs?.[op] ?? this.settings.timeoutsMs[op];
  }

  private onFailure(engineId: string): OnFailure {
    return this.settings.overrides[engineId]?.onFailure ?? this.settings.onFailure;
  }

  /**
   * Calls `fn` on the selected engine under its deadline; on failure retries on `legacy` (or fails
   * closed when the slot is `strict`). `validate` checks the answer against the contract.
   */
  async call<T>(
    selected: Selection,
    op: EngineOperation,
    caller: CallerContext,
    fn: (engine: ContextEngine, ctx: CallContext, target: RegisteredEngine) => Promise<T>,
    validate?: (value: T, target: RegisteredEngine) => void,
  ): Promise<Routed<T>> {
    // A request selects once but may call several times (Bootstrap, then Ingest or Assemble): an
    // engine quarantined or replaced since — by this request's own failed Bootstrap, say — is not
    // called again on the old selection.
    const stale = !selected.target.builtin && (selected.target.quarantine !== undefined || this.registry.get(selected.target.id) !== selected.target);
    const selection = stale ? this.select(selected.session) : selected;
    const target = selection.target;
    if (selection.mode === Mode.MODE_FALLBACK && this.onFailure(selection.selectedId) === "strict") {
      // A strict slot never answers from another engine, not even while its engine is quarantined.
      throw new EngineFailedError(status.UNAVAILABLE, `${selection.fallbackReason} (on_failure: strict, no fallback)`, selection.selectedId);
    }
    if (target.builtin) {
      if (selection.mode === Mode.MODE_FALLBACK) this.countFallback(selection.selectedId, op, selection.fallbackKind ?? "not_registered");
      const { value } = await this.attempt(selection.session, target, op, caller, fn, validate);
      return { value, engineId: target.id, mode: selection.mode, fallbackReason: selection.fallbackReason };
    }
    const release = this.bulkhead.tryAcquire(target.id);
    if (!release) {
      const key =
        this.settings.overrides[target.id]?.maxConcurrentCalls !== undefined
          ? `engines.overrides.${target.id}.max_concurrent_calls`
          : "engines.max_concurrent_calls";
      const limit = this.bulkhead.limitOf(target.id);
      const reason = `engine "${target.id}" is at its concurrency limit (${limit} calls in flight, ${key})`;
      this.observer?.onRejected(target, op, reason);
      if (this.onFailure(target.id) === "strict")
        throw new ThrottledError(`${reason} (on_failure: strict, no fallback)`, { key, value: limit }, { engineId: target.id });
      return this.onLegacy(selection, op, caller, fn, validate, reason, "rejected");
    }
    let tried: HostGrant | undefined;
    // A call that may fall back keeps a reserve of the runtime's deadline for legacy's answer.
    const reserveMs = this.onFailure(target.id) === "fallback" ? this.settings.fallbackReserveMs : 0;
    try {
      const { value, grant } = await this.attempt(selection.session, target, op, caller, fn, validate, (g) => (tried = g), reserveMs).finally(release);
      return { value, engineId: target.id, mode: Mode.MODE_NORMAL, fallbackReason: "", grant };
    } catch (err) {
      // Cancellation, or the runtime's own deadline, is the caller's doing: never held against the engine.
      // A CancelledError the engine raised while the caller is still there is the engine's failure.
      if (err instanceof CallerDeadlineError || caller.signal?.aborted) throw err;
      if (err instanceof EngineRevokedError) {
        if (this.onFailure(target.id) === "strict")
          throw new EngineFailedError(status.UNAVAILABLE, `${err.message} (on_failure: strict, no fallback)`, target.id);
        const kind = err.standing === "deregistered" ? "not_registered" : "quarantined";
        return { ...(await this.onLegacy(selection, op, caller, fn, validate, err.message, kind)), failedGrant: tried };
      }
      if (err instanceof ShortDeadlineError) {
        const reason = `engine "${target.id}" did not answer ${op} within the runtime's deadline less the time kept for legacy's answer (${errorText(err)})`;
        return { ...(await this.onLegacy(selection, op, caller, fn, validate, reason, "short")), failedGrant: tried };
      }
      const kind: FailureKind = err instanceof DeadlineExceededError ? "timeout" : err instanceof ContractViolation ? "contract" : "error";
      const reason = `engine "${target.id}" failed on ${op}: ${errorText(err)}`;
      this.observer?.onEngineFailure(target, op, kind, reason);
      if (this.onFailure(target.id) === "strict") {
        // What its callbacks already committed stays committed: say so, or the runtime would think nothing happened.
        const landed = tried?.delegatedCompactions.map((d) => d.entryId) ?? [];
        const note = landed.length ? `; its DelegateCompaction had already committed compaction ${landed.join(", ")}` : "";
        throw new EngineFailedError(
          kind === "timeout" ? status.DEADLINE_EXCEEDED : status.UNAVAILABLE,
          `${reason} (on_failure: strict, no fallback)${note}`,
          target.id,
        );
      }
      this.observer?.onFallback(target, op, reason);
      return { ...(await this.onLegacy(selection, op, caller, fn, validate, reason, kind)), failedGrant: tried };
    }
  }

  /** The fallback: the same call on `legacy`, within what is left of the runtime's deadline. */
  private async onLegacy<T>(
    selection: Selection,
    op: EngineOperation,
    caller: CallerContext,
    fn: (engine: ContextEngine, ctx: CallContext, target: RegisteredEngine) => Promise<T>,
    validate: ((value: T, target: RegisteredEngine) => void) | undefined,
    reason: string,
    kind: FallbackKind,
  ): Promise<Routed<T>> {
    const legacy = this.registry.legacy;
    this.countFallback(selection.selectedId, op, kind);
    const { value } = await this.attempt(selection.session, legacy, op, caller, fn, validate);
    return { value, engineId: legacy.id, mode: Mode.MODE_FALLBACK, fallbackReason: reason };
  }

  /**
   * Every call answered by `legacy` instead of the selected engine is counted, by reason: on the
   * selected engine's EngineStatus when the registry holds it (quarantined ones included), and in
   * the metrics.
   */
  private countFallback(selectedId: string, op: EngineOperation, kind: FallbackKind): void {
    const selected = this.registry.get(selectedId);
    if (selected && !selected.builtin) {
      selected.counters.fallbacks++;
      selected.counters.fallbacksByReason[kind] = (selected.counters.fallbacksByReason[kind] ?? 0) + 1;
    }
    this.hooks?.fallback(selectedId, op, kind);
  }

  private async attempt<T>(
    session: SessionRef,
    target: RegisteredEngine,
    op: EngineOperation,
    caller: CallerContext,
    fn: (engine: ContextEngine, ctx: CallContext, target: RegisteredEngine) => Promise<T>,
    validate?: (value: T, target: RegisteredEngine) => void,
    onIssued?: (grant: HostGrant) => void,
    reserveMs = 0,
  ): Promise<{ value: T; grant?: HostGrant }> {
    // A runtime that has already gone away (e.g. during this request's Bootstrap) gets no call made for it.
    if (caller.signal?.aborted) throw new CancelledError(`engine "${target.id}" ${op}: cancelled by the caller`);
    const now = Date.now();
    const configuredMs = now + this.timeoutMs(target.id, op);
    // The engine's share of the runtime's deadline: what is left less the reserve for legacy's
    // answer, the reserve never more than half of what is left.
    const shareMs = caller.deadlineMs - Math.min(reserveMs, Math.max(0, (caller.deadlineMs - now) / 2));
    const deadlineMs = Math.min(configuredMs, shareMs);
    const issued = target.builtin ? undefined : this.grants.issue(target, session.sessionId, deadlineMs);
    // Revoking the grant (the engine quarantined or deregistered meanwhile) ends the call at once.
    const revoked = issued ? new AbortController() : undefined;
    if (issued) {
      issued.grant.cancel = (error) => revoked!.abort(error);
      onIssued?.(issued.grant);
    }
    target.counters.calls++;
    const started = performance.now();
    let outcome: EngineCallOutcome = "ok";
    // The caller's `away` goes with the call: the engine gives the tenant's turn up only while it
    // waits outside contextd (a sidecar's answer, a summarizer's model), not for the host's work
    // done inside the call (a compaction before a sidecar's Assemble, counting its answer).
    const run = (trace: Record<string, string> | undefined) =>
      withDeadline(
        deadlineMs,
        caller.signal,
        `engine "${target.id}" ${op}`,
        (ctx) => fn(target.engine, { ...ctx, host: issued?.host, trace, away: caller.away }, target),
        revoked?.signal,
      ).then((value) => {
        if (validate) validate(value, target);
        return value;
      });
    try {
      const value = this.hooks ? await this.hooks.around(target.id, op, caller.trace, run) : await run(caller.trace);
      return { value, grant: issued?.grant };
    } catch (err) {
      if (err instanceof EngineRevokedError) {
        // Not a failure of this call: the engine was taken out of service while it ran.
        outcome = "revoked";
        throw err;
      }
      outcome = caller.signal?.aborted
        ? "cancelled"
        : err instanceof DeadlineExceededError
          ? "timeout"
          : err instanceof ContractViolation
            ? "contract"
            : "error";
      // Only a deadline that really passed for the runtime is the runtime's; an engine that answers
      // DEADLINE_EXCEEDED early has failed like any other error.
      if (err instanceof DeadlineExceededError && caller.deadlineMs < configuredMs && Date.now() >= caller.deadlineMs - CLOCK_SLACK_MS) {
        outcome = "cancelled";
        throw new CallerDeadlineError(`${err.message} (the runtime's own deadline)`);
      }
      if (err instanceof DeadlineExceededError && shareMs < configuredMs && Date.now() >= shareMs - CLOCK_SLACK_MS) {
        outcome = "short";
        throw new ShortDeadlineError(err.message);
      }
      if (!caller.signal?.aborted) {
        target.counters.failures++;
        if (err instanceof DeadlineExceededError) target.counters.timeouts++;
      }
      throw err;
    } finally {
      if (issued) issued.grant.ended = true;
      this.hooks?.finished(target.id, op, outcome, (performance.now() - started) / 1000);
    }
  }
}

/**
 * An error as a fallback or quarantine reason: its text is often the engine's own (a gRPC error's
 * details), which reaches every runtime (fallback_reason, GetEngine, WatchEngines), the store and
 * the logs — so bounded and escaped like any untrusted text.
 */
function errorText(err: unknown): string {
  return boundedText(err instanceof Error ? err.message : String(err), REASON_MAX_CHARS);
}

/** The longest error text a reason carries (a reason adds a few words of its own). */
const REASON_MAX_CHARS = 512;
