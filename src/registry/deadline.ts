import type { CallContext } from "../contract/engine-api.js";
import { CancelledError, DeadlineExceededError } from "../contract/errors.js";

/**
 * Runs `fn` under an absolute deadline. The signal handed to `fn` fires when the deadline passes,
 * the caller cancels, or `ended` fires (the call is ended for another reason: its engine lost its
 * standing), and the returned promise settles at that moment even if `fn` ignores the signal — a
 * hung engine must never hold the runtime past its deadline. A late result is dropped. `ended`'s
 * reason is the rejection.
 */
export async function withDeadline<T>(
  deadlineMs: number,
  callerSignal: AbortSignal | undefined,
  describe: string,
  fn: (ctx: CallContext) => Promise<T>,
  ended?: AbortSignal,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onCallerAbort: (() => void) | undefined;
  let onStop: (() => void) | undefined;
  const budgetMs = deadlineMs - Date.now();

  const stop = new Promise<never>((_, reject) => {
    const expire = (then: "now" | "after-answer") => {
      const err = new DeadlineExceededError(`${describe}: deadline of ${Math.max(0, Math.round(budgetMs))}ms exceeded`);
      reject(err);
      // Work that has not started is told at once. Work under way (a gRPC call to a hung engine) is
      // told in the next turn of the event loop: cancelling a call takes the transport a
      // millisecond or so, which the fallback answer that the rejection leads to need not wait for.
      if (then === "now") controller.abort(err);
      else setImmediate(() => controller.abort(err));
    };
    if (budgetMs <= 0) return expire("now");
    if (Number.isFinite(deadlineMs)) timer = setTimeout(() => expire("after-answer"), budgetMs);
    if (callerSignal) {
      onCallerAbort = () => {
        const err = new CancelledError(`${describe}: cancelled by the caller`);
        controller.abort(err);
        reject(err);
      };
      if (callerSignal.aborted) onCallerAbort();
      else callerSignal.addEventListener("abort", onCallerAbort, { once: true });
    }
    if (ended) {
      onStop = () => {
        controller.abort(ended.reason);
        reject(ended.reason);
      };
      if (ended.aborted) onStop();
      else ended.addEventListener("abort", onStop, { once: true });
    }
  });

  try {
    const work = fn({ signal: controller.signal, deadlineMs });
    work.catch(() => undefined); // a result or error that arrives after the deadline is dropped
    return await Promise.race([work, stop]);
  } finally {
    if (timer) clearTimeout(timer);
    if (onCallerAbort) callerSignal?.removeEventListener("abort", onCallerAbort);
    if (onStop) ended?.removeEventListener("abort", onStop);
    stop.catch(() => undefined);
  }
}
