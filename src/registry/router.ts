import { LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { ContractViolation, DeadlineExceededError, EngineFailedError, ThrottledError } from "../contract/errors.js";
import { status } from "@grpc/grpc-js";
import { Mode, SelectionSource, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { Locality } from "../contract/gen/contextd/v1/registry.js";
import { Bulkhead } from "./bulkhead.js";
import { isDegraded, NO_OBSERVER, type EngineCallObserver, type EngineOperation, type FailureKind, type FallbackKind } from "./engine-call-observer.js";
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
import { EngineUnreachableError } from "./engine-channel.js";
import { EngineRevokedError, type HostGrant, type HostGrants } from "./host-grants.js";
import type { ServedEngines } from "./served-engines.js";

export type OnFailure = "fallback" | "strict";

/**
 * The operations sent to another instance when one fails: reads only. An Ingest, Compact or
 * AfterTurn the failed instance may have applied is not sent again (it falls back as before) —
 * unless it was never sent: no connection could be made (EngineUnreachableError).
 */
const RETRIED: ReadonlySet<EngineOperation> = new Set<EngineOperation>(["assemble"]);

export interface RoutingSettings {
  contextEngine: string;
  agents: Record<string, string>;
  timeoutsMs: Record<EngineOperation, number>;
  onFailure: OnFailure;
  /** The bulkhead: calls in flight to one sidecar instance at most (bulkhead.ts). */
  maxConcurrentCalls: number;
  /**
   * Where this replica runs: an instance whose locality names the same `replica` (or else the same
   * `node`) is local, and called first while it is eligible. None: no instance is local.
   */
  locality?: Locality;
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
  /**
   * The engine instance that will be called: one of the selected engine's (picked by the router),
   * or `legacy` when none is usable.
   */
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
 * Routes engine calls: resolves the slot, picks one of the engine's instances (this replica's local
 * one first, else the less loaded of two at random), keeps each instance within its bulkhead, sends
 * an Assemble an instance failed to another one, and falls back to `legacy` within what is left of
 * the runtime's deadline only when no instance can answer (or fails closed for a `strict` slot);
 * docs/registry.md, "Instances". Sending one call — its deadline, host grant and answer check — is
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
    /** Records each sidecar a session is sent to, for its deletion's ForgetSession (served-engines.ts). */
    private readonly served?: ServedEngines,
  ) {
    this.bulkhead = new Bulkhead((id) => this.settings.overrides[id]?.maxConcurrentCalls ?? this.settings.maxConcurrentCalls);
    this.dispatch = new EngineDispatch((id, op) => this.timeoutMs(id, op), grants, observer);
    registry.view = { outstanding: (i) => this.bulkhead.active(i.id, i.instanceId), local: (i) => this.isLocal(i) };
  }

  select(session: SessionRef): Selection {
    const agentId = session.agentId;
    const perAgent = agentId ? this.settings.agents[agentId] : undefined;
    const selectedId = perAgent ?? this.settings.contextEngine;
    const source = perAgent || selectedId !== LEGACY_ENGINE_ID ? SelectionSource.SELECTION_SOURCE_CONFIGURED : SelectionSource.SELECTION_SOURCE_DEFAULT;
    const legacy = this.registry.legacy;
    const instances = this.registry.instances(selectedId);
    const fallback = (reason: string, fallbackKind: FallbackKind): Selection => ({
      session,
      selectedId,
      source,
      target: legacy,
      mode: Mode.MODE_FALLBACK,
      fallbackReason: reason,
      fallbackKind,
    });
    if (instances.length === 0) return fallback(`engine "${selectedId}" is not registered`, "not_registered");
    const free = instances.filter((i) => !i.quarantine);
    if (free.length === 0) {
      // Every instance is ejected: the engine's own record (its most recent instance's) says why.
      const q = this.registry.get(selectedId)!.quarantine ?? instances[0].quarantine!;
      const which = instances.length > 1 ? ` (all ${instances.length} instances)` : "";
      return fallback(`engine "${selectedId}" is quarantined${which} (${q.operation}: ${q.reason})`, "quarantined");
    }
    if (isDegraded(free.length, instances.length)) this.observer.degraded?.({ engineId: selectedId, serving: free.length, instances: instances.length });
    // All at their bulkhead: the call turns the pick's one away (call).
    const target = this.pick(selectedId, new Set()) ?? free[0];
    return { session, selectedId, source, target, mode: Mode.MODE_NORMAL, fallbackReason: "" };
  }

  /**
   * One eligible instance of `engineId` — not quarantined, below its bulkhead, not in `exclude`:
   * this replica's local one first; else, of two picked at random, the one with fewer calls in
   * flight (power of two choices: near the least loaded without every replica piling onto the same
   * one), the one called less so far on a tie, so that calls one after another alternate.
   */
  private pick(engineId: string, exclude: ReadonlySet<RegisteredEngine>): RegisteredEngine | undefined {
    const limit = this.bulkhead.limitOf(engineId);
    const load = (i: RegisteredEngine) => this.bulkhead.active(i.id, i.instanceId);
    const eligible = this.registry.instances(engineId).filter((i) => !i.quarantine && !exclude.has(i) && load(i) < limit);
    const local = eligible.filter((i) => this.isLocal(i));
    const pool = local.length > 0 ? local : eligible;
    if (pool.length <= 1) return pool[0];
    const a = Math.floor(Math.random() * pool.length);
    const b = (a + 1 + Math.floor(Math.random() * (pool.length - 1))) % pool.length;
    const [x, y] = [pool[a], pool[b]];
    if (load(x) !== load(y)) return load(x) < load(y) ? x : y;
    return x.instanceCounters.calls <= y.instanceCounters.calls ? x : y;
  }

  /** Local: the instance runs beside this replica (the same `replica`), or on its machine (the same `node`). */
  private isLocal(i: RegisteredEngine): boolean {
    const here = this.settings.locality;
    if (!here || !i.locality) return false;
    if (here.replica && i.locality.replica) return here.replica === i.locality.replica;
    return Boolean(here.node && i.locality.node && here.node === i.locality.node);
  }

  timeoutMs(engineId: string, op: EngineOperation): number {
    return this.settings.overrides[engineId]?.timeoutsMs?.[op] ?? this.settings.timeoutsMs[op];
  }

  private onFailure(engineId: string): OnFailure {
    return this.settings.overrides[engineId]?.onFailure ?? this.settings.onFailure;
  }

  /**
   * Calls `fn` on the selected engine's instance under its deadline; on failure sends an Assemble to
   * another instance, then retries on `legacy` (or fails closed when the slot is `strict`).
   * `validate` checks the answer against the contract.
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
      throw new EngineFailedError(status.UNAVAILABLE, `${selection.fallbackReason} (on_failure: strict, no fallback)`, selection.selectedId);
    }
    if (target.builtin) {
      if (selection.mode === Mode.MODE_FALLBACK) this.fellBack(selection.selectedId, op, selection.fallbackKind ?? "not_registered", selection.fallbackReason);
      const { value } = await this.dispatch.send(selection.session, target, op, caller, fn, validate);
      return { value, engineId: target.id, mode: selection.mode, fallbackReason: selection.fallbackReason };
    }
    return this.onInstances(selection, op, caller, fn, validate);
  }

  /**
   * The call on the selection's instance; an instance at its bulkhead is passed over for another
   * eligible one, and an Assemble an instance failed (or lost its standing during) is sent to
   * another eligible one within the caller's deadline: an Assemble only reads, so sending it twice
   * is safe, unlike an Ingest or Compact the failed instance may have applied. `legacy` (or,
   * strict, a status) answers when no instance is left.
   */
  private async onInstances<T>(
    selection: Selection,
    op: EngineOperation,
    caller: CallerContext,
    fn: EngineCall<T>,
    validate: AnswerCheck<T> | undefined,
  ): Promise<Routed<T>> {
    const passed = new Set<RegisteredEngine>();
    let target = selection.target;
    for (;;) {
      const attempt = await this.attempt(selection, target, op, caller, fn, validate);
      if ("routed" in attempt) return attempt.routed;
      passed.add(target);
      const next = attempt.retry ? this.pick(target.id, passed) : undefined;
      if (!next) return attempt.otherwise();
      this.observer.failedOver?.({ engine: target, next, op, reason: attempt.reason });
      target = next;
    }
  }

  /**
   * One instance's try: its answer, or why not — whether another instance may try instead, and
   * what answers when none does (the fallback, or the strict status).
   */
  private async attempt<T>(
    selection: Selection,
    target: RegisteredEngine,
    op: EngineOperation,
    caller: CallerContext,
    fn: EngineCall<T>,
    validate: AnswerCheck<T> | undefined,
  ): Promise<{ routed: Routed<T> } | { retry: boolean; reason: string; otherwise: () => Promise<Routed<T>> }> {
    // Before the engine can hold anything of the session: its deletion must reach this engine too.
    if (this.served) await this.served.record(selection.session.sessionId, target.id);
    const release = this.bulkhead.tryAcquire(target.id, target.instanceId);
    if (!release) {
      const key =
        this.settings.overrides[target.id]?.maxConcurrentCalls !== undefined
          ? `engines.overrides.${target.id}.max_concurrent_calls`
          : "engines.max_concurrent_calls";
      const limit = this.bulkhead.limitOf(target.id);
      const reason = `engine "${target.id}" is at its concurrency limit (${limit} calls in flight, ${key})`;
      return {
        retry: true,
        reason,
        otherwise: async () => {
          this.observer.rejected?.(target, op, reason);
          if (this.onFailure(target.id) === "strict")
            throw new ThrottledError(`${reason} (on_failure: strict, no fallback)`, { key, value: limit }, { engineId: target.id });
          return this.onLegacy(selection, op, caller, fn, validate, reason, "rejected");
        },
      };
    }
    let tried: HostGrant | undefined;
    // A call that may fall back keeps a reserve of the runtime's deadline for legacy's answer.
    const reserveMs = this.onFailure(target.id) === "fallback" ? this.settings.fallbackReserveMs : 0;
    const retry = RETRIED.has(op);
    try {
      const { value, grant } = await this.dispatch.send(selection.session, target, op, caller, fn, validate, (g) => (tried = g), reserveMs).finally(release);
      return { routed: { value, engineId: target.id, mode: Mode.MODE_NORMAL, fallbackReason: "", grant } };
    } catch (err) {
      // Cancellation, or the runtime's own deadline, is the caller's doing: never held against the engine.
      // A CancelledError the engine raised while the caller is still there is the engine's failure.
      if (err instanceof CallerDeadlineError || caller.signal?.aborted) throw err;
      if (err instanceof EngineRevokedError) {
        const kind = err.standing === "deregistered" ? "not_registered" : "quarantined";
        return {
          retry,
          reason: err.message,
          otherwise: async () => {
            if (this.onFailure(target.id) === "strict")
              throw new EngineFailedError(status.UNAVAILABLE, `${err.message} (on_failure: strict, no fallback)`, target.id);
            return { ...(await this.onLegacy(selection, op, caller, fn, validate, err.message, kind)), failedGrant: tried };
          },
        };
      }
      if (err instanceof ShortDeadlineError) {
        // The share of the runtime's deadline is spent: no time for another instance either.
        const reason = `engine "${target.id}" did not answer ${op} within the runtime's deadline less the time kept for legacy's answer (${errorText(err)})`;
        return {
          retry: false,
          reason,
          otherwise: async () => ({ ...(await this.onLegacy(selection, op, caller, fn, validate, reason, "short")), failedGrant: tried }),
        };
      }
      // The dispatch told the observer (the quarantine ejects the instance) as the call ended.
      const unsent = err instanceof EngineUnreachableError;
      const kind: FailureKind = err instanceof DeadlineExceededError ? "timeout" : err instanceof ContractViolation ? "contract" : "error";
      const reason = failureReason(target, op, err);
      return {
        retry: retry || unsent,
        reason,
        otherwise: async () => {
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
          return { ...(await this.onLegacy(selection, op, caller, fn, validate, reason, kind)), failedGrant: tried };
        },
      };
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
