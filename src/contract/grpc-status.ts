import { status, type ServiceError } from "@grpc/grpc-js";
import { encodeStatusDetails, statusDetailsMetadata } from "./error-details.js";
import { ContextdError, reasonOfCode, type ErrorDetail } from "./errors.js";
import type { ErrorReason } from "./gen/contextd/v1/errors.js";

/** What a call's own deadline and cancellation say about an AbortError thrown while serving it. */
export interface CallScopeHint {
  /** The call's deadline (epoch ms; Infinity when none). */
  deadlineMs?: number;
  /** Why the call's signal fired, when known. */
  cause?: "deadline" | "cancelled";
}

/** A status as contextd answers it: code and message, and the reason and detail its trailer carries. */
export interface ErrorStatus {
  code: status;
  /** The status message (grpc-message). */
  details: string;
  /** contextd.v1.ErrorReason, sent as ErrorInfo.reason. */
  reason: ErrorReason;
  /** ErrorInfo metadata and BadRequest fields. */
  detail?: ErrorDetail;
}

/**
 * The one place where errors become gRPC statuses — for contextd's services and for engines built
 * with the SDK alike: a ContextdError keeps its code, message, reason and detail; an AbortError (a
 * signal fired) is DEADLINE_EXCEEDED when the call's deadline passed and CANCELLED otherwise, with
 * the reason of that code; anything else is a bug and answers INTERNAL (reason INTERNAL, no
 * metadata) without leaking internals beyond the message.
 */
export function statusOf(err: unknown, scope?: CallScopeHint): ErrorStatus {
  const answer = rawStatusOf(err, scope);
  return { ...answer, details: wellFormed(answer.details) };
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

function rawStatusOf(err: unknown, scope?: CallScopeHint): ErrorStatus {
  if (err instanceof ContextdError) return { code: err.code, details: err.message, reason: err.reason, detail: err.detail };
  if (isAbortError(err)) {
    const deadline = err.name === "TimeoutError" || scope?.cause === "deadline" || (scope?.deadlineMs !== undefined && Date.now() >= scope.deadlineMs);
    const code = deadline ? status.DEADLINE_EXCEEDED : status.CANCELLED;
    return { code, details: err.message || (deadline ? "deadline exceeded" : "cancelled"), reason: reasonOfCode(code) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message || "unknown"}`, reason: reasonOfCode(status.INTERNAL) };
}

/**
 * The error a grpc-js handler answers with: statusOf's code and message, and its trailers carry
 * the same code and message again with the reason and detail, as a google.rpc.Status in
 * `grpc-status-details-bin` (error-details.ts).
 */
export function toServiceError(err: unknown, scope?: CallScopeHint): Partial<ServiceError> {
  return serviceErrorOf(statusOf(err, scope));
}

/** The grpc-js error of an ErrorStatus (toServiceError; the engine SDK, after bounding the message). */
export function serviceErrorOf(s: ErrorStatus): Partial<ServiceError> {
  const metadata = statusDetailsMetadata(encodeStatusDetails(s.code, s.details, s.reason, s.detail));
  return { code: s.code, details: s.details, message: s.details, metadata };
}

/** An error that is a bug of ours (it maps to INTERNAL), as opposed to an answer we meant to give. */
export function isInternal(err: unknown): boolean {
  return !(err instanceof ContextdError) && !isAbortError(err);
}

export function isAbortError(err: unknown): err is Error {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}
