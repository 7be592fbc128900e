import { status } from "@grpc/grpc-js";
import { ContextdError } from "../contract/errors.js";
import { ErrorReason } from "../contract/gen/contextd/v1/errors.js";

/**
 * Why a chat-completions call failed, once its retries are spent. Each is a ContextdError, so
 * HostService.Complete answers with the right status through the one error → status mapping
 * (src/contract/grpc-status.ts) and the `openai` summarizer can tell a model failure (fall back to
 * extractive) from a cancellation (stop). Messages never contain the API key: every text that
 * came from the upstream is scrubbed of it before it reaches one.
 */
export type ModelFailure = "rejected" | "rate_limited" | "unavailable" | "timeout" | "bad_response" | "spend_limited";

export abstract class ModelError extends ContextdError {
  abstract readonly failure: ModelFailure;
  constructor(
    code: status,
    message: string,
    /** HTTP attempts made, retries included. */
    readonly attempts: number,
    /** The last HTTP status, when the endpoint answered. */
    readonly httpStatus?: number,
    /** More ErrorInfo metadata (the reason's comment in errors.proto lists the keys). */
    more: Readonly<Record<string, string | number>> = {},
  ) {
    super(code, message, { metadata: { attempts, http_status: httpStatus, ...more } });
  }
}

/**
 * A 4xx other than 408/429: the request itself is wrong, so it is not retried. A prompt the
 * model refuses (400, 413, 422: too long, bad field) is the caller's INVALID_ARGUMENT; a refused
 * key, an unknown model or URL (401, 403, 404, ...) is the host's configuration, FAILED_PRECONDITION.
 */
export class ModelRejectedError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_REJECTED;
  readonly failure = "rejected";
  constructor(message: string, attempts: number, httpStatus: number) {
    super(httpStatus === 400 || httpStatus === 413 || httpStatus === 422 ? status.INVALID_ARGUMENT : status.FAILED_PRECONDITION, message, attempts, httpStatus);
  }
}

/** 429 on every attempt (or a Retry-After longer than contextd waits). */
export class ModelRateLimitedError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_RATE_LIMITED;
  readonly failure = "rate_limited";
  constructor(message: string, attempts: number) {
    super(status.RESOURCE_EXHAUSTED, message, attempts, 429);
  }
}

/** 5xx, 408 or a network error (refused, reset, DNS) on every attempt. */
export class ModelUnavailableError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_UNAVAILABLE;
  readonly failure = "unavailable";
  constructor(message: string, attempts: number, httpStatus?: number) {
    super(status.UNAVAILABLE, message, attempts, httpStatus);
  }
}

/** No answer within the per-request `timeout` (not retried: see chat-completions.ts). */
export class ModelTimeoutError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_TIMEOUT;
  readonly failure = "timeout";
  constructor(message: string, attempts: number) {
    super(status.DEADLINE_EXCEEDED, message, attempts);
  }
}

/** A 2xx whose body is not JSON, has no choices, or no text content. */
export class ModelResponseError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_BAD_RESPONSE;
  readonly failure = "bad_response";
  constructor(message: string, attempts: number, httpStatus: number) {
    super(status.UNKNOWN, message, attempts, httpStatus);
  }
}

/** The error thrown when the caller's signal aborts a call (the same shape native compaction throws). */
export function abortError(signal: AbortSignal, what: string): Error {
  const reason: unknown = signal.reason;
  const error = new Error(reason instanceof Error && reason.message ? `${what}: ${reason.message}` : `${what}: aborted`, { cause: reason });
  error.name = "AbortError";
  return error;
}

export function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}
