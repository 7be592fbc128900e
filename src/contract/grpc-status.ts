import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { ContextdError } from "./errors.js";

/** What a call's own deadline and cancellation say about an AbortError thrown while serving it. */
export interface CallScopeHint {
  /** The call's deadline (epoch ms; Infinity when none). */
  deadlineMs?: number;
  /** Why the call's signal fired, when known. */
  cause?: "deadline" | "cancelled";
}

/**
 * The one place where errors become gRPC statuses — for contextd's services and for engines built
 * with the SDK alike: a ContextdError keeps its code and message; an AbortError (a signal fired)
 * is DEADLINE_EXCEEDED when the call's deadline passed and CANCELLED otherwise; anything else is a
 * bug and answers INTERNAL without leaking internals beyond the message.
 */
export function statusOf(err: unknown, scope?: CallScopeHint): { code: status; details: string } {
  if (err instanceof ContextdError) return { code: err.code, details: err.message };
  if (isAbortError(err)) {
    const deadline = err.name === "TimeoutError" || scope?.cause === "deadline" || (scope?.deadlineMs !== undefined && Date.now() >= scope.deadlineMs);
    return { code: deadline ? status.DEADLINE_EXCEEDED : status.CANCELLED, details: err.message || (deadline ? "deadline exceeded" : "cancelled") };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message || "unknown"}` };
}

export function toServiceError(err: unknown, scope?: CallScopeHint): Partial<ServiceError> {
  const { code, details } = statusOf(err, scope);
  return { code, details, message: details, metadata: new Metadata() };
}

/** An error that is a bug of ours (it maps to INTERNAL), as opposed to an answer we meant to give. */
export function isInternal(err: unknown): boolean {
  return !(err instanceof ContextdError) && !isAbortError(err);
}

export function isAbortError(err: unknown): err is Error {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}
