import type { CountOptions } from "../tokens/tokenizer.js";
import type { RuntimeAccess } from "./runtime-access.js";

/** What counting on the pool needs of a call: whom it is for, its cancellation and deadline. */
export interface CountingCall {
  access?: RuntimeAccess;
  signal?: AbortSignal;
  deadlineMs: number;
}

/**
 * The options of a runtime call's token counting (src/tokens/count-pool.ts): the pool serves each
 * runtime token and agent by turns, and drops the work when the call is cancelled or its deadline
 * passes.
 */
export function countingFor(call: CountingCall, agentId: string): CountOptions {
  return { tenant: `runtime:${call.access?.tenant ?? ""}/agent:${agentId}`, signal: call.signal, deadlineMs: call.deadlineMs };
}
