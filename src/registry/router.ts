import { LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { ContextdError, ContractViolation, DeadlineExceededError, ResourceExhaustedError } from "../contract/errors.js";
import { status } from "@grpc/grpc-js";
import { Mode, SelectionSource, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { Bulkhead } from "./bulkhead.js";
import { NO_OBSERVER, type EngineCallObserver, type EngineOperation, type FailureKind, type FallbackKind } from "./engine-call-observer.js";
import {
  CallerDeadlineError,
  EngineDispatch,
  failureReason,
  errorText,
  ShortDeadlineError,
  type AnswerCheck,
  type CallerContext,
  type EngineCall,
} from "./engine-dispatch.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import { EngineRevokedError, type HostGrant, type HostGrants } from "./host-grants.js";

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

/**
 * Routes engine calls: resolves the slot, keeps each sidecar within its bulkhead, and falls back to
 * `legacy` within what is left of the runtime's deadline when the selected engine fails (or fails
 * closed for a `strict` slot). Sending one call — its deadline, host grant and answer check — is
 * EngineDispatch's (engine-dispatch.ts); what happened is told once, to one EngineCallObserver
 * (engine-call-observer.ts), which the registry's counters, the quarantine and the server's
 * metrics and tracing share.
 */
export class Router {
  private readonly bulkhead: Bulkhead;
  private readonly dispatch: EngineDispatch;

  /** `observer`: the registry's counters, the quarantine, metrics and tracing (observeAll). */
  constructor(
    private readonly registry: EngineRegistry,
    private readonly settings: RoutingSettings,
    grants: HostGrants,
    private readonly observer: EngineCallObserver = NO_OBSERVER,
  ) {
    this.bulkhead = new Bulkhead((id) => this.settings.overrides[id]?.maxConcurrentCalls ?? this.settings.maxConcurrentCalls);
    this.dispatch = new EngineDispatch((id, op) => this.timeoutMs(id, op), grants, observer);
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
  async call<T>(selected: Selection, op: EngineOperation, caller: CallerContext, fn: EngineCall<T>, validate?: AnswerCheck<T>): Promise<Routed<T>> {
    // A request selects once but may call several times (Bootstrap, then Ingest or Assemble): an
    // engine quarantined or replaced since — by this request's own failed Bootstrap, say — is not
    // called again on the old selection.
    const stale = !selected.target.builtin && (selected.target.quarantine !== undefined || !this.registry.holds(selected.target));
    const selection = stale ? this.select(selected.session) : selected;
    const target = selection.target;
    if (selection.mode === Mode.MODE_FALLBACK && this.onFailure(selection.selectedId) === "strict") {
      // A strict slot never answers from another engine, not even while its engine is quarantined.
      throw new ContextdError(status.UNAVAILABLE, `${selection.fallbackReason} (on_failure: strict, no fallback)`);
    }
    if (target.builtin) {
      if (selection.mode === Mode.MODE_FALLBACK) this.fellBack(selection.selectedId, op, selection.fallbackKind ?? "not_registered", selection.fallbackReason);
      const { value } = await this.dispatch.send(selection.session, target, op, caller, fn, validate);
      return { value, engineId: target.id, mode: selection.mode, fallbackReason: selection.fallbackReason };
    }
    const release = this.bulkhead.tryAcquire(target.id);
    if (!release) {
      const key =
        this.settings.overrides[target.id]?.maxConcurrentCalls !== undefined
          ? `engines.overrides.${target.id}.max_concurrent_calls`
          : "engines.max_concurrent_calls";
      const reason = `engine "${target.id}" is at its concurrency limit (${this.bulkhead.limitOf(target.id)} calls in flight, ${key})`;
      this.observer.rejected?.(target, op, reason);
      if (this.onFailure(target.id) === "strict") throw new ResourceExhaustedError(`${reason} (on_failure: strict, no fallback)`);
      return this.onLegacy(selection, op, caller, fn, validate, reason, "rejected");
    }
    let tried: HostGrant | undefined;
    // A call that may fall back keeps a reserve of the runtime's deadline for legacy's answer.
    const reserveMs = this.onFailure(target.id) === "fallback" ? this.settings.fallbackReserveMs : 0;
    try {
      const { value, grant } = await this.dispatch.send(selection.session, target, op, caller, fn, validate, (g) => (tried = g), reserveMs).finally(release);
      return { value, engineId: target.id, mode: Mode.MODE_NORMAL, fallbackReason: "", grant };
    } catch (err) {
      // Cancellation, or the runtime's own deadline, is the caller's doing: never held against the engine.
      // A CancelledError the engine raised while the caller is still there is the engine's failure.
      if (err instanceof CallerDeadlineError || caller.signal?.aborted) throw err;
      if (err instanceof EngineRevokedError) {
        if (this.onFailure(target.id) === "strict") throw new ContextdError(status.UNAVAILABLE, `${err.message} (on_failure: strict, no fallback)`);
        const kind = err.standing === "deregistered" ? "not_registered" : "quarantined";
        return { ...(await this.onLegacy(selection, op, caller, fn, validate, err.message, kind)), failedGrant: tried };
      }
      if (err instanceof ShortDeadlineError) {
        const reason = `engine "${target.id}" did not answer ${op} within the runtime's deadline less the time kept for legacy's answer (${errorText(err)})`;
        return { ...(await this.onLegacy(selection, op, caller, fn, validate, reason, "short")), failedGrant: tried };
      }
      // The dispatch told the observer (the quarantine ejects the engine) as the call ended.
      const kind: FailureKind = err instanceof DeadlineExceededError ? "timeout" : err instanceof ContractViolation ? "contract" : "error";
      const reason = failureReason(target, op, err);
      if (this.onFailure(target.id) === "strict") {
        // What its callbacks already committed stays committed: say so, or the runtime would think nothing happened.
        const landed = tried?.delegatedCompactions.map((d) => d.entryId) ?? [];
        const note = landed.length ? `; its DelegateCompaction had already committed compaction ${landed.join(", ")}` : "";
        throw new ContextdError(kind === "timeout" ? status.DEADLINE_EXCEEDED : status.UNAVAILABLE, `${reason} (on_failure: strict, no fallback)${note}`);
      }
      return { ...(await this.onLegacy(selection, op, caller, fn, validate, reason, kind)), failedGrant: tried };
    }
  }

  /** The fallback: the same call on `legacy`, within what is left of the runtime's deadline. */
  private async onLegacy<T>(
    selection: Selection,
    op: EngineOperation,
    caller: CallerContext,
    fn: EngineCall<T>,
    validate: AnswerCheck<T> | undefined,
    reason: string,
    kind: FallbackKind,
  ): Promise<Routed<T>> {
    const legacy = this.registry.legacy;
    this.fellBack(selection.selectedId, op, kind, reason);
    const { value } = await this.dispatch.send(selection.session, legacy, op, caller, fn, validate);
    return { value, engineId: legacy.id, mode: Mode.MODE_FALLBACK, fallbackReason: reason };
  }

  /** Every call answered by `legacy` instead of the selected engine is told, with the selected engine as the registry holds it now. */
  private fellBack(selectedId: string, op: EngineOperation, kind: FallbackKind, reason: string): void {
    const selected = this.registry.get(selectedId);
    this.observer.fellBack?.({ selectedId, ...(selected ? { selected } : {}), op, kind, reason });
  }
}
