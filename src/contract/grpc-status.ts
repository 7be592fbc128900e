import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { ContextdError } from "./errors.js";

/**
 * The one place where errors become gRPC statuses: a ContextdError keeps its code and message;
 * anything else is a bug and answers INTERNAL without leaking internals beyond the message.
 */
export function toServiceError(err: unknown): Partial<ServiceError> {
  if (err instanceof ContextdError) {
    return { code: err.code, details: err.message, message: err.message, metadata: new Metadata() };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message}`, message, metadata: new Metadata() };
}

export function isInternal(err: unknown): boolean {
  return !(err instanceof ContextdError);
}
