import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import { CancelledError, ContractViolation, DeadlineExceededError } from "../contract/errors.js";
import { boundedText } from "../contract/quote.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import { withDeadline } from "./deadline.js";
import type { EngineCallObserver, EngineCallOutcome, EngineOperation } from "./engine-call-observer.js";
import type { RegisteredEngine } from "./engine-registry.js";
import { EngineRevokedError, type HostGrant, type HostGrants } from "./host-grants.js";

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

/** One engine call: the engine, its host-callback context, the engine as registered. */
export type EngineCall<T> = (engine: ContextEngine, ctx: CallContext, target: RegisteredEngine) => Promise<T>;

/** Checks an answer against the contract: throws ContractViolation. */
export type AnswerCheck<T> = (value: T, target: RegisteredEngine) => void;

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
 * Sends one call to one engine: under the earlier of its configured deadline and its share of the
 * runtime's, with a host grant for its HostService callbacks (sidecars), ended at once when the
 * engine loses its standing, its answer checked, and its end told to the observer with what it was
 * (the caller's, the engine's, neither). Which engine, and what to do when it fails, is the
 * router's (router.ts).
 */
export class EngineDispatch {
  constructor(
    private readonly timeouts: (engineId: string, op: EngineOperation) => number,
    private readonly grants: HostGrants,
    private readonly observer: EngineCallObserver,
  ) {}

  /**
   * `reserveMs` is kept back from the runtime's deadline for legacy's answer should this call fail
   * (never more than half of what is left); `onIssued` hears of the call's host grant before it is sent.
   */
  async send<T>(
    session: SessionRef,
    target: RegisteredEngine,
    op: EngineOperation,
    caller: CallerContext,
    fn: EngineCall<T>,
    validate?: AnswerCheck<T>,
    onIssued?: (grant: HostGrant) => void,
    reserveMs = 0,
  ): Promise<{ value: T; grant?: HostGrant }> {
    // A runtime that has already gone away (e.g. during this request's Bootstrap) gets no call made for it.
    if (caller.signal?.aborted) throw new CancelledError(`engine "${target.id}" ${op}: cancelled by the caller`);
    const now = Date.now();
    const configuredMs = now + this.timeouts(target.id, op);
    const shareMs = caller.deadlineMs - Math.min(reserveMs, Math.max(0, (caller.deadlineMs - now) / 2));
    const deadlineMs = Math.min(configuredMs, shareMs);
    const issued = target.builtin ? undefined : this.grants.issue(target, session, deadlineMs);
    // Revoking the grant (the engine quarantined or deregistered meanwhile) ends the call at once.
    const revoked = issued ? new AbortController() : undefined;
    if (issued) {
      issued.grant.cancel = (error) => revoked!.abort(error);
      onIssued?.(issued.grant);
    }
    this.observer.started?.(target, op);
    const started = performance.now();
    let outcome: EngineCallOutcome = "ok";
    let reason: string | undefined;
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
      const value = this.observer.around ? await this.observer.around(target.id, op, caller.trace, run) : await run(caller.trace);
      return { value, grant: issued?.grant };
    } catch (err) {
      // Not a failure of this call: the engine was taken out of service while it ran.
      if (err instanceof EngineRevokedError) {
        outcome = "revoked";
        throw err;
      }
      const aborted = caller.signal?.aborted === true;
      outcome = aborted ? "cancelled" : err instanceof DeadlineExceededError ? "timeout" : err instanceof ContractViolation ? "contract" : "error";
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
      if (!aborted) reason = failureReason(target, op, err);
      throw err;
    } finally {
      if (issued) issued.grant.ended = true;
      this.observer.ended?.({ engine: target, op, outcome, seconds: (performance.now() - started) / 1000, ...(reason ? { reason } : {}) });
    }
  }
}

/** What a failure the engine caused is called: the quarantine record's and the fallback's reason. */
export function failureReason(target: RegisteredEngine, op: EngineOperation, err: unknown): string {
  return `engine "${target.id}" failed on ${op}: ${errorText(err)}`;
}

/**
 * An error as a fallback or quarantine reason: its text is often the engine's own (a gRPC error's
 * details), which reaches every runtime (fallback_reason, GetEngine, WatchEngines), the store and
 * the logs — so bounded and escaped like any untrusted text.
 */
export function errorText(err: unknown): string {
  return boundedText(err instanceof Error ? err.message : String(err), REASON_MAX_CHARS);
}

/** The longest error text a reason carries (a reason adds a few words of its own). */
const REASON_MAX_CHARS = 512;
