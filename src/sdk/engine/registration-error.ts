import { status, type ServiceError } from "@grpc/grpc-js";
import { Refusal, type RegisterEngineResponse } from "../../contract/gen/contextd/v1/registry.js";

// How the Registrar reads a failed call to the registry: which failures are worth retrying, and
// the error it reports when registration has failed for good.

/** Why registration failed for good: a refusal answer or a non-retryable gRPC status. */
export class RegistrationError extends Error {
  constructor(
    message: string,
    /** The refusal when the registry answered `ok = false`. */
    readonly refusal?: Refusal,
    /** The gRPC status when the call failed. */
    readonly code?: status,
    readonly response?: RegisterEngineResponse,
  ) {
    super(message);
    this.name = "RegistrationError";
  }
}

/** Statuses that mean "the registry is not there (yet)": keep trying. */
export const TRANSIENT = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED, status.RESOURCE_EXHAUSTED, status.ABORTED]);

/**
 * Refusals that may pass later: UNREACHABLE (contextd could not dial the engine yet), TOO_MANY_INSTANCES
 * (the id is at engines.max_instances until a dead instance is removed). Every other one is final.
 */
export const RETRIED_REFUSALS = new Set<Refusal>([Refusal.REFUSAL_UNREACHABLE, Refusal.REFUSAL_TOO_MANY_INSTANCES]);

export function codeOf(err: unknown): number | undefined {
  const code = (err as Partial<ServiceError> | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

export function detailsOf(err: unknown): string {
  const e = err as Partial<ServiceError>;
  return e?.details || e?.message || String(err);
}
