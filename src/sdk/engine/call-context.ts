import type { ServerUnaryCall } from "@grpc/grpc-js";

type CallLike = Pick<ServerUnaryCall<unknown, unknown>, "getDeadline" | "on" | "removeListener">;

/** Why an engine call's signal fired. */
export type AbortCause = "cancelled" | "deadline";

/** The cancellation side of one engine call. */
export interface CallScope {
  /** Fires when the caller cancels or the deadline passes. */
  readonly signal: AbortSignal;
  /** Epoch ms; Infinity when the caller set no deadline. */
  readonly deadlineMs: number;
  /** Why the signal fired; undefined while it has not. */
  cause(): AbortCause | undefined;
  /** Stops the deadline timer (call it when the call has been answered). */
  dispose(): void;
}

// setTimeout cannot wait longer than 2^31-1 ms; deadlines further away than ~24 days are left
// to grpc-js.
const MAX_TIMER_MS = 2 ** 31 - 1;
// A 'cancelled' event this close to the deadline is the deadline: grpc-js enforcing it here, or the
// caller's own deadline cancelling the call — the server's deadline starts when the call arrives, so
// the caller's cancellation comes ahead of it by the transit and any event-loop delay (tens of ms on
// a loaded machine; 10 ms classified such calls as cancelled).
const DEADLINE_SLACK_MS = 50;

export function deadlineToMs(deadline: Date | number): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

export function abortReason(cause: AbortCause): DOMException {
  return cause === "deadline"
    ? new DOMException("the caller's deadline passed", "TimeoutError")
    : new DOMException("the caller cancelled the call", "AbortError");
}

/**
 * Turns a server call's deadline and cancellation into an AbortSignal. grpc-js emits `cancelled`
 * both when the client cancels and when it enforces the deadline; our own timer makes the signal
 * fire at the deadline even if that event comes late.
 */
export function createCallScope(call: CallLike): CallScope {
  const controller = new AbortController();
  const deadlineMs = deadlineToMs(call.getDeadline());
  let cause: AbortCause | undefined;
  let timer: NodeJS.Timeout | undefined;

  const abort = (why: AbortCause) => {
    if (cause) return;
    cause = why;
    if (timer) clearTimeout(timer);
    controller.abort(abortReason(why));
  };
  const onCancelled = () => abort(Date.now() >= deadlineMs - DEADLINE_SLACK_MS ? "deadline" : "cancelled");
  call.on("cancelled", onCancelled);

  if (Number.isFinite(deadlineMs)) {
    const delay = deadlineMs - Date.now();
    if (delay <= 0) abort("deadline");
    else if (delay <= MAX_TIMER_MS) timer = setTimeout(() => abort("deadline"), delay);
  }

  return {
    signal: controller.signal,
    deadlineMs,
    cause: () => cause,
    dispose() {
      if (timer) clearTimeout(timer);
      call.removeListener("cancelled", onCancelled);
    },
  };
}

/** True for the errors an aborted operation rejects with (fetch, timers/promises, our own signal). */
export function isAbortError(err: unknown): err is Error {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}

/** A signal that fires when any of the given ones does (AbortSignal.any without the Node 20.3 floor). */
export function anySignal(signals: AbortSignal[]): AbortSignal {
  const live = signals.filter(Boolean);
  if (live.length === 1) return live[0];
  const controller = new AbortController();
  for (const s of live) {
    if (s.aborted) {
      controller.abort(s.reason);
      return controller.signal;
    }
  }
  const listeners: Array<[AbortSignal, () => void]> = [];
  for (const s of live) {
    const onAbort = () => {
      controller.abort(s.reason);
      for (const [other, l] of listeners) other.removeEventListener("abort", l);
    };
    listeners.push([s, onAbort]);
    s.addEventListener("abort", onAbort, { once: true });
  }
  return controller.signal;
}
