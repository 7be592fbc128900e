import type { RegisteredEngine } from "./engine-registry.js";

export type EngineOperation = "ingest" | "assemble" | "compact" | "after_turn" | "maintain" | "bootstrap" | "subagent" | "forget";

/** Why an engine call did not produce a usable answer: the failures an engine is quarantined for. */
export type FailureKind = "error" | "timeout" | "contract";

/**
 * How an engine call ended: the failure kinds, the caller's cancellation, `short` (it ran out of
 * the share of a short runtime deadline it was given, not its own deadline), `revoked` (its engine
 * was quarantined or deregistered while it ran), or ok.
 */
export type EngineCallOutcome = "ok" | FailureKind | "cancelled" | "short" | "revoked";

/**
 * Why a call was answered by `legacy` instead of the selected engine (a bounded set: a metric label
 * and EngineStatus.fallbacks_by_reason key): the engine was not registered or quarantined when the
 * call was routed, it failed (error, timeout, contract), its bulkhead was full (rejected), or it
 * did not answer within its share of the runtime's own, shorter deadline (short).
 */
export type FallbackKind = FailureKind | "not_registered" | "quarantined" | "rejected" | "short";

/** Whether an outcome (or a fallback's kind) is a failure the engine caused. */
export function isFailure(outcome: EngineCallOutcome | FallbackKind): outcome is FailureKind {
  return outcome === "error" || outcome === "timeout" || outcome === "contract";
}

/** One engine call, ended. */
export interface EngineCallEnd {
  engine: RegisteredEngine;
  op: EngineOperation;
  outcome: EngineCallOutcome;
  seconds: number;
  /** For a failure the engine caused: what the quarantine record and the fallback reason say. */
  reason?: string;
}

/** A runtime's call answered by `legacy` instead of the engine its slot selected. */
export interface EngineFallback {
  selectedId: string;
  /** The selected engine as the registry holds it now (quarantined ones included), if it does. */
  selected?: RegisteredEngine;
  op: EngineOperation;
  kind: FallbackKind;
  reason: string;
}

/** A call one instance of an engine could not answer, sent to another instance of it. */
export interface EngineFailover {
  /** The instance that failed the call (or was at its bulkhead, or lost its standing during it). */
  engine: RegisteredEngine;
  /** The instance the call goes to next. */
  next: RegisteredEngine;
  op: EngineOperation;
  reason: string;
}

/**
 * An engine serving with fewer than PANIC_THRESHOLD of its instances (the rest quarantined): it still
 * answers, but one more ejection may leave it to `legacy` — like Envoy's panic threshold, said in the
 * logs (and metrics) before it happens.
 */
export interface EngineDegraded {
  engineId: string;
  /** Instances not quarantined. */
  serving: number;
  instances: number;
}

/** The share of an engine's instances below which it is reported degraded (Envoy's default, 50%). */
export const PANIC_THRESHOLD = 0.5;

/** Whether an engine with `serving` of its `instances` not quarantined serves, but with too few of them. */
export function isDegraded(serving: number, instances: number): boolean {
  return serving > 0 && serving < instances * PANIC_THRESHOLD;
}

/**
 * Everything the router tells about engine calls, in one interface: the registry's counters
 * (EngineStatus), the quarantine, and the server's metrics and tracing each implement the parts
 * they need. The router works with none (`NO_OBSERVER`).
 */
export interface EngineCallObserver {
  /** Runs the call: a tracer wraps it in a span and hands back the trace context the engine continues. */
  around?<T>(
    engineId: string,
    op: EngineOperation,
    trace: Record<string, string> | undefined,
    call: (trace: Record<string, string> | undefined) => Promise<T>,
  ): Promise<T>;
  /** Every engine call, `legacy`'s included, as it is sent. */
  started?(engine: RegisteredEngine, op: EngineOperation): void;
  /** Every engine call, `legacy`'s included, once it ended (after `around`'s work). */
  ended?(call: EngineCallEnd): void;
  /** Every call answered by `legacy` instead of the selected engine, whatever the kind. */
  fellBack?(fallback: EngineFallback): void;
  /** A call not sent because the engine is at its concurrency limit: load, not a failure. */
  rejected?(engine: RegisteredEngine, op: EngineOperation, reason: string): void;
  /** A call sent to another instance of its engine instead of falling back (docs/registry.md, "Instances"). */
  failedOver?(failover: EngineFailover): void;
  /** A request routed to an engine serving with too few of its instances (EngineDegraded). */
  degraded?(degraded: EngineDegraded): void;
}

export const NO_OBSERVER: EngineCallObserver = {};

/** The observers as one, told in order; `around`s nest, the first outermost. */
export function observeAll(...observers: Array<EngineCallObserver | undefined>): EngineCallObserver {
  const all = observers.filter((o): o is EngineCallObserver => o !== undefined);
  const arounds = all.filter((o) => o.around);
  const around = <T>(
    engineId: string,
    op: EngineOperation,
    trace: Record<string, string> | undefined,
    call: (trace: Record<string, string> | undefined) => Promise<T>,
  ): Promise<T> => {
    const run = arounds.reduceRight<(t: Record<string, string> | undefined) => Promise<T>>((inner, o) => (t) => o.around!(engineId, op, t, inner), call);
    return run(trace);
  };
  return {
    // None wraps the call: the dispatch calls the engine directly (no closures per call).
    ...(arounds.length > 0 ? { around } : {}),
    started: (e, op) => all.forEach((o) => o.started?.(e, op)),
    ended: (c) => all.forEach((o) => o.ended?.(c)),
    fellBack: (f) => all.forEach((o) => o.fellBack?.(f)),
    rejected: (e, op, reason) => all.forEach((o) => o.rejected?.(e, op, reason)),
    failedOver: (f) => all.forEach((o) => o.failedOver?.(f)),
    degraded: (d) => all.forEach((o) => o.degraded?.(d)),
  };
}
