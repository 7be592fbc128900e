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
  const { code, details } = rawStatusOf(err, scope);
  return { code, details: wellFormed(details) };
}

/**
 * grpc-js percent-encodes `grpc-message` with encodeURI, which throws on a lone UTF-16 surrogate —
 * out of its sendStatus, so the throw took the whole server down. Messages quote what callers sent
 * (V8's JSON.parse errors cite one code unit, which may be half of a pair), so every status's
 * details are made well-formed here: a lone surrogate becomes U+FFFD, as UTF-8 would carry it.
 */
export function wellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

function rawStatusOf(err: unknown, scope?: CallScopeHint): { code: status; details: string } {
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
