import { status } from "@grpc/grpc-js";
import { ErrorReason } from "./gen/contextd/v1/errors.js";
import { quote } from "./quote.js";

/**
 * What an error is about, for a program rather than a person: grpc-status.ts sends it as the
 * status's google.rpc.ErrorInfo metadata and BadRequest (error-details.ts), next to the message.
 */
export interface ErrorDetail {
  /**
   * ErrorInfo.metadata: the keys the reason's comment in proto/contextd/v1/errors.proto lists.
   * Values are bounded and escaped when sent (they often came from the request); undefined ones
   * are left out.
   */
  readonly metadata?: Readonly<Record<string, string | number | undefined>>;
  /**
   * The request fields an INVALID_ARGUMENT is about, as paths in proto names
   * (`messages[2].content[0].tool_call.id`): BadRequest's field violations.
   */
  readonly fields?: readonly string[];
}

/**
 * Every error contextd raises on purpose carries the gRPC status it maps to. Lower layers (store,
 * legacy engine, host) throw these; contract/grpc-status.ts is the one place that turns them into
 * gRPC statuses, called by the server's handler wrapper (server/middleware/bind-service.ts) and by
 * the engine SDK. Anything else is an INTERNAL bug.
 *
 * Each also has a stable reason (contextd.v1.ErrorReason, sent as ErrorInfo.reason): a class with
 * a finer one than its code declares it once, as its static `reason`; any other's is the value
 * named after its code (INVALID_ARGUMENT, NOT_FOUND, ...), which the enum has for every code.
 */
export class ContextdError extends Error {
  /** The reason of every error of this class; undefined: the one named after the error's code. */
  static readonly reason: ErrorReason | undefined = undefined;

  constructor(
    readonly code: status,
    message: string,
    /** What the error is about, for the status's details (ErrorDetail). */
    readonly detail: ErrorDetail = {},
  ) {
    super(message);
    this.name = new.target.name;
  }

  /** contextd.v1.ErrorReason: the class's, or the one named after the code. */
  get reason(): ErrorReason {
    return (this.constructor as typeof ContextdError).reason ?? reasonOfCode(this.code);
  }
}

/** The ErrorReason named after a status code; the enum has one for every code but OK. */
export function reasonOfCode(code: status): ErrorReason {
  const reason = ErrorReason[status[code] as keyof typeof ErrorReason] as ErrorReason | undefined;
  return reason === undefined || reason === ErrorReason.ERROR_REASON_UNSPECIFIED ? ErrorReason.UNKNOWN : reason;
}

/**
 * An invalid request. With `fields`, it is about those request fields (BadRequest); fieldError()
 * makes the common one whose message starts with the field's path.
 */
export class InvalidArgumentError extends ContextdError {
  constructor(message: string, detail?: ErrorDetail) {
    super(status.INVALID_ARGUMENT, message, detail);
  }
}

/** The INVALID_ARGUMENT about one request field, whose message is the field's path and what is wrong: "session.session_id is required". */
export function fieldError(field: string, problem: string): InvalidArgumentError {
  return new InvalidArgumentError(`${field} ${problem}`, { fields: [field] });
}

export class NotFoundError extends ContextdError {
  constructor(message: string, detail?: ErrorDetail) {
    super(status.NOT_FOUND, message, detail);
  }
}

/** The session a request names does not exist (or is not the caller's to see). */
export class SessionNotFoundError extends NotFoundError {
  static override readonly reason = ErrorReason.SESSION_NOT_FOUND;
  constructor(sessionId: string, message = `session ${quote(sessionId)} not found`) {
    super(message, { metadata: { session_id: sessionId } });
  }
}

/** No engine of the id a request names is registered. */
export class EngineNotRegisteredError extends NotFoundError {
  static override readonly reason = ErrorReason.ENGINE_NOT_REGISTERED;
  constructor(engineId: string) {
    super(`engine_id "${engineId}" is not registered`, { metadata: { engine_id: engineId } });
  }
}

export class AlreadyExistsError extends ContextdError {
  constructor(message: string, detail?: ErrorDetail) {
    super(status.ALREADY_EXISTS, message, detail);
  }
}

/** The session a request would create exists already (or belongs to an agent the caller may not act for). */
export class SessionExistsError extends AlreadyExistsError {
  static override readonly reason = ErrorReason.SESSION_ALREADY_EXISTS;
  constructor(sessionId: string, message = `session ${quote(sessionId)} already exists`) {
    super(message, { metadata: { session_id: sessionId } });
  }
}

/** An idempotency key reused in a session for different messages: a client bug, not a retry. */
export class IdempotencyKeyReusedError extends AlreadyExistsError {
  static override readonly reason = ErrorReason.IDEMPOTENCY_KEY_REUSED;
  constructor(key: string, sessionId: string) {
    super(
      `idempotency_key "${key}" was already used in session "${sessionId}" for different messages; ` +
        "a retry must send the same messages, a new request needs a new key",
      { metadata: { session_id: sessionId, idempotency_key: key } },
    );
  }
}

export class ResourceExhaustedError extends ContextdError {
  constructor(message: string, detail?: ErrorDetail) {
    super(status.RESOURCE_EXHAUSTED, message, detail);
  }
}

/** The configuration key of a limit and its value (ErrorInfo metadata `limit`, `limit_value`). */
export interface Limit {
  key: string;
  value: number;
}

/** A request over a limit of the configuration: sending it again will not help, a smaller one may. */
export class LimitExceededError extends ResourceExhaustedError {
  static override readonly reason = ErrorReason.LIMIT_EXCEEDED;
  constructor(message: string, limit?: Limit) {
    super(message, { metadata: { limit: limit?.key, limit_value: limit?.value } });
  }
}

/** A call that would take its agent past a quota (`quotas.*`): nothing written; retrying does not help until the agent holds less. */
export class QuotaExceededError extends ResourceExhaustedError {
  static override readonly reason = ErrorReason.QUOTA_EXCEEDED;
  constructor(message: string, quota: { key: string; value: number; used: number; agentId: string }) {
    super(message, { metadata: { quota: quota.key, limit_value: quota.value, used: quota.used, agent_id: quota.agentId } });
  }
}

/** A call not processed because its agent, token or engine is at a rate or concurrency limit: retry with backoff. */
export class ThrottledError extends ResourceExhaustedError {
  static override readonly reason = ErrorReason.THROTTLED;
  constructor(message: string, limit: Limit, more: { engineId?: string; retryDelayMs?: number } = {}) {
    super(message, { metadata: { limit: limit.key, limit_value: limit.value, engine_id: more.engineId, retry_delay_ms: more.retryDelayMs } });
  }
}

export class UnauthenticatedError extends ContextdError {
  constructor(message: string) {
    super(status.UNAUTHENTICATED, message);
  }
}

export class PermissionDeniedError extends ContextdError {
  constructor(message: string) {
    super(status.PERMISSION_DENIED, message);
  }
}

export class FailedPreconditionError extends ContextdError {
  constructor(message: string) {
    super(status.FAILED_PRECONDITION, message);
  }
}

/** Optimistic-concurrency loss: another compaction of the session committed first. */
export class ConflictError extends ContextdError {
  static override readonly reason = ErrorReason.COMPACTION_CONFLICT;
  constructor(message: string) {
    super(status.ABORTED, message);
  }
}

/**
 * Something contextd needs is unreachable: a transient condition the caller may retry, unlike
 * INTERNAL (a bug).
 */
export class UnavailableError extends ContextdError {
  constructor(message: string, detail?: ErrorDetail) {
    super(status.UNAVAILABLE, message, detail);
  }
}

/** The store (PostgreSQL) is unreachable, closed, or dropped the connection. */
export class StoreUnavailableError extends UnavailableError {
  static override readonly reason = ErrorReason.STORE_UNAVAILABLE;
}

/**
 * The engine a strict slot selects failed, timed out, is quarantined or not registered, and no
 * other engine may answer instead (`on_failure: strict`): UNAVAILABLE, or DEADLINE_EXCEEDED when it
 * timed out.
 */
export class EngineFailedError extends ContextdError {
  static override readonly reason = ErrorReason.ENGINE_FAILED;
  constructor(code: status.UNAVAILABLE | status.DEADLINE_EXCEEDED, message: string, engineId: string) {
    super(code, message, { metadata: { engine_id: engineId } });
  }
}

export class DeadlineExceededError extends ContextdError {
  constructor(message: string) {
    super(status.DEADLINE_EXCEEDED, message);
  }
}

export class CancelledError extends ContextdError {
  constructor(message: string) {
    super(status.CANCELLED, message);
  }
}

export class UnimplementedError extends ContextdError {
  constructor(message: string) {
    super(status.UNIMPLEMENTED, message);
  }
}

/**
 * An engine's answer broke the contract (over its budget or size bound, unknown entries, garbage):
 * the engine's fault, which the router counts against it before `legacy` answers instead. It never
 * reaches a client as itself.
 */
export class ContractViolation extends Error {}
