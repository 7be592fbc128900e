import type { Metadata, StatusObject } from "@grpc/grpc-js";
import { toServiceError } from "../../contract/grpc-status.js";
import type { AuthRule, DeadlineClass } from "../../contract/rpc-table.js";

/**
 * The shape of one middleware step (interceptors.ts runs them, in order, inside one grpc-js
 * interceptor): given the method, a step returns its hooks for one call. Its own file so that steps
 * in other files (load-shedding.ts) and the chain that runs them both depend on it, not on each other.
 */
export interface MethodInfo {
  path: string;
  service: string;
  name: string;
  type: "unary" | "client_stream" | "server_stream" | "bidi_stream";
}

/** A call refused by a step: its status, and the trailers that carry its reason (error-details.ts). */
export type Refusal = Pick<StatusObject, "code" | "details"> & { metadata?: Metadata };

/** The refusal of a typed error: its status and its google.rpc.Status trailer, as a handler's error would answer. */
export function refusalOf(err: Error): Refusal {
  const e = toServiceError(err);
  return { code: e.code!, details: e.details!, ...(e.metadata ? { metadata: e.metadata } : {}) };
}

/** One step's view of one call. Every hook is optional. */
export interface CallStep {
  /**
   * The call's metadata arrived; a step may change it before the handler sees it, or refuse the
   * call by returning its status: the call then ends with it at once (every step's `end` hears it;
   * the steps after the refusing one never see the metadata) and the handler never runs. The
   * caller hears the status once its request has been read (interceptors.ts `chain` says why).
   */
  metadata?(md: Metadata): Refusal | void;
  /** The handler sent an answer. */
  message?(m: unknown): void;
  /** The call ended with `s` (the caller's cancellation is CANCELLED). */
  end?(s: Pick<StatusObject, "code" | "details">): void;
}

export type Step = (method: MethodInfo) => CallStep;

/**
 * One served RPC as the admission steps see it: the columns of its table row they read (its
 * service's table, contract/rpc-table.ts; served-services.ts collects them by method path).
 */
export interface ServedRpc {
  auth: AuthRule;
  deadline: DeadlineClass;
}
