import { status } from "@grpc/grpc-js";

/**
 * Every error contextd raises on purpose carries the gRPC status it maps to. Lower layers (store,
 * legacy engine, host) throw these; contract/grpc-status.ts is the one place that turns them into
 * gRPC statuses, called by the server's handler wrapper (server/middleware/bind-service.ts) and by
 * the engine SDK. Anything else is an INTERNAL bug.
 */
export class ContextdError extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidArgumentError extends ContextdError {
  constructor(message: string) {
    super(status.INVALID_ARGUMENT, message);
  }
}

export class NotFoundError extends ContextdError {
  constructor(message: string) {
    super(status.NOT_FOUND, message);
  }
}

export class AlreadyExistsError extends ContextdError {
  constructor(message: string) {
    super(status.ALREADY_EXISTS, message);
  }
}

export class ResourceExhaustedError extends ContextdError {
  constructor(message: string) {
    super(status.RESOURCE_EXHAUSTED, message);
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
  constructor(message: string) {
    super(status.ABORTED, message);
  }
}

/**
 * A dependency contextd cannot work without (the PostgreSQL store) is unreachable or dropped the
 * connection: a transient condition the caller may retry, unlike INTERNAL (a bug).
 */
export class UnavailableError extends ContextdError {
  constructor(message: string) {
    super(status.UNAVAILABLE, message);
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
