import { Metadata, type status } from "@grpc/grpc-js";
import type { ErrorDetail } from "./errors.js";
import { type ErrorReason, errorReasonFromJSON, errorReasonToJSON } from "./gen/contextd/v1/errors.js";
import type { Any } from "./gen/google/protobuf/any.js";
import { BadRequest, ErrorInfo } from "./gen/google/rpc/error_details.js";
import { Status } from "./gen/google/rpc/status.js";
import { boundedText } from "./quote.js";

/**
 * gRPC's rich error model, as contextd sends and reads it: a status's `google.rpc.Status` in the
 * `grpc-status-details-bin` trailer, holding an ErrorInfo (the stable reason, contextd.v1.ErrorReason)
 * and, for an invalid request field, a BadRequest. proto/contextd/v1/errors.proto is the contract.
 */

/** ErrorInfo.domain of every reason contextd sends: the enum contextd.v1.ErrorReason names them. */
export const ERROR_DOMAIN = "contextd.dev";

/** The trailer gRPC implementations (grpc-go's status, grpcio-status, ...) read a google.rpc.Status from. */
export const STATUS_DETAILS_TRAILER = "grpc-status-details-bin";

/** The longest metadata value sent: most are ids, at most 256 characters in a valid request. */
const MAX_METADATA_VALUE_CHARS = 256;

const TYPE_PREFIX = "type.googleapis.com/";
const ERROR_INFO_TYPE = `${TYPE_PREFIX}google.rpc.ErrorInfo`;
const BAD_REQUEST_TYPE = `${TYPE_PREFIX}google.rpc.BadRequest`;

/**
 * The encoded google.rpc.Status of an error answer: `code` and `message` as the status says them,
 * an ErrorInfo with `reason`, and a BadRequest when `detail` names fields. Metadata values are
 * bounded and escaped (boundedText): they often came from the request, and travel in trailers.
 */
export function encodeStatusDetails(code: status, message: string, reason: ErrorReason, detail: ErrorDetail = {}): Buffer {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(detail.metadata ?? {})) {
    if (value !== undefined) metadata[key] = boundedText(String(value), MAX_METADATA_VALUE_CHARS);
  }
  const details: Any[] = [
    { typeUrl: ERROR_INFO_TYPE, value: Buffer.from(ErrorInfo.encode({ reason: errorReasonToJSON(reason), domain: ERROR_DOMAIN, metadata }).finish()) },
  ];
  if (detail.fields?.length) {
    const badRequest = BadRequest.encode({
      fieldViolations: detail.fields.map((field) => ({ field, description: message, reason: "" })),
    }).finish();
    details.push({ typeUrl: BAD_REQUEST_TYPE, value: Buffer.from(badRequest) });
  }
  return Buffer.from(Status.encode({ code, message, details }).finish());
}

/** Trailers carrying the encoded Status (encodeStatusDetails). */
export function statusDetailsMetadata(encoded: Buffer): Metadata {
  const metadata = new Metadata();
  metadata.set(STATUS_DETAILS_TRAILER, encoded);
  return metadata;
}

/** A failed call's details, decoded (errorDetails()). */
export interface ErrorDetails {
  /** ErrorInfo.reason: the name of a contextd.v1.ErrorReason value when `domain` is contextd's. */
  reason: string;
  /** ErrorInfo.domain: "contextd.dev" (ERROR_DOMAIN) for contextd's reasons. */
  domain: string;
  /** ErrorInfo.metadata: the keys the reason's comment in errors.proto lists. */
  metadata: Record<string, string>;
  /** BadRequest's field violations: the request fields an INVALID_ARGUMENT is about. */
  fieldViolations: Array<{ field: string; description: string }>;
}

/**
 * The details of a failed call (a grpc-js ServiceError, or any error with its trailers as
 * `metadata`): the ErrorInfo and BadRequest contextd puts in `grpc-status-details-bin`, or undefined
 * when there are none (a status not from contextd's handlers, say; errors.proto lists them).
 */
export function errorDetails(err: unknown): ErrorDetails | undefined {
  const metadata = (err as { metadata?: unknown } | null)?.metadata;
  if (!(metadata instanceof Metadata)) return undefined;
  const [encoded] = metadata.get(STATUS_DETAILS_TRAILER);
  if (!Buffer.isBuffer(encoded)) return undefined;
  let found: ErrorDetails | undefined;
  const fieldViolations: ErrorDetails["fieldViolations"] = [];
  try {
    for (const any of Status.decode(encoded).details) {
      if (any.typeUrl === ERROR_INFO_TYPE && !found) {
        const info = ErrorInfo.decode(any.value);
        found = { reason: info.reason, domain: info.domain, metadata: info.metadata, fieldViolations };
      } else if (any.typeUrl === BAD_REQUEST_TYPE) {
        for (const v of BadRequest.decode(any.value).fieldViolations) fieldViolations.push({ field: v.field, description: v.description });
      }
    }
  } catch {
    return undefined;
  }
  return found;
}

/**
 * The contextd.v1.ErrorReason of a failed call: compare it with `ErrorReason.SESSION_NOT_FOUND`,
 * print it with `errorReasonToJSON`. UNRECOGNIZED for a reason newer than this client; undefined
 * when the error carries no contextd reason.
 */
export function errorReason(err: unknown): ErrorReason | undefined {
  const details = errorDetails(err);
  if (!details || details.domain !== ERROR_DOMAIN) return undefined;
  return errorReasonFromJSON(details.reason);
}
