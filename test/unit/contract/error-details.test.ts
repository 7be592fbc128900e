/**
 * The status details grpc-status.ts sends with every error (error-details.ts): a google.rpc.Status
 * with the status's own code and message, an ErrorInfo with the error's reason and bounded,
 * escaped metadata, a BadRequest for named fields; and errorDetails()/errorReason() read them back.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { parseErrorReasons } from "../../../scripts/error-reasons.mjs";
import { errorDetails, errorReason, STATUS_DETAILS_TRAILER } from "../../../src/contract/error-details.js";
import {
  ConflictError,
  EngineFailedError,
  EngineNotRegisteredError,
  fieldError,
  IdempotencyKeyReusedError,
  LimitExceededError,
  SessionExistsError,
  SessionNotFoundError,
  StoreUnavailableError,
  ThrottledError,
  type ContextdError,
} from "../../../src/contract/errors.js";
import { ErrorReason, errorReasonToJSON } from "../../../src/contract/gen/contextd/v1/errors.js";
import { Status } from "../../../src/contract/gen/google/rpc/status.js";
import { toServiceError } from "../../../src/contract/grpc-status.js";
import { ModelRateLimitedError, ModelRejectedError, ModelResponseError, ModelTimeoutError, ModelUnavailableError } from "../../../src/llm/model-errors.js";
import { EngineUnreachableError } from "../../../src/registry/engine-channel.js";
import { EngineRevokedError } from "../../../src/registry/host-grants.js";

const PROTO = parseErrorReasons(readFileSync(path.resolve(import.meta.dirname, "../../../proto/contextd/v1/errors.proto"), "utf8"));

function sent(err: unknown): ServiceError {
  return toServiceError(err) as ServiceError;
}

describe("error details", () => {
  it("an error's status keeps its code and message, and its trailer holds a google.rpc.Status with the same code and message", () => {
    const e = sent(new SessionNotFoundError("s-1"));
    expect(e.code).toBe(status.NOT_FOUND);
    expect(e.details).toBe('session "s-1" not found');
    const s = Status.decode(e.metadata.get(STATUS_DETAILS_TRAILER)[0] as Buffer);
    expect({ code: s.code, message: s.message }).toEqual({ code: status.NOT_FOUND, message: e.details });
    expect(errorDetails(e)).toEqual({ reason: "SESSION_NOT_FOUND", domain: "contextd.dev", metadata: { session_id: "s-1" }, fieldViolations: [] });
    expect(errorReason(e)).toBe(ErrorReason.SESSION_NOT_FOUND);
  });

  it("every finer reason is sent with a status code its proto comment names", () => {
    const errors: ContextdError[] = [
      new SessionNotFoundError("s"),
      new EngineNotRegisteredError("e"),
      new SessionExistsError("s"),
      new IdempotencyKeyReusedError("k", "s"),
      new LimitExceededError("over", { key: "limits.x", value: 1 }),
      new ThrottledError("busy", { key: "limits.y", value: 2 }),
      new ConflictError("lost"),
      new StoreUnavailableError("down"),
      new EngineFailedError(status.UNAVAILABLE, "failed", "e"),
      new EngineFailedError(status.DEADLINE_EXCEEDED, "slow", "e"),
      new EngineUnreachableError("no route"),
      new EngineRevokedError("gone", "quarantined"),
      new ModelRejectedError("bad prompt", 1, 400),
      new ModelRejectedError("bad key", 1, 401),
      new ModelRateLimitedError("429", 3),
      new ModelUnavailableError("503", 3, 503),
      new ModelTimeoutError("slow", 1),
      new ModelResponseError("garbage", 1, 200),
    ];
    for (const err of errors) {
      const reason = errorReasonToJSON(err.reason);
      expect(PROTO.find((v) => v.name === reason)?.codes, `${err.name}: ${reason}`).toContain(status[err.code]);
      expect(errorReason(sent(err))).toBe(err.reason);
    }
  });

  it("an INVALID_ARGUMENT about a field carries a BadRequest with the field's path and the message", () => {
    const e = sent(fieldError("messages[1].role", "is required"));
    expect(e.details).toBe("messages[1].role is required");
    expect(errorDetails(e)).toEqual({
      reason: "INVALID_ARGUMENT",
      domain: "contextd.dev",
      metadata: {},
      fieldViolations: [{ field: "messages[1].role", description: "messages[1].role is required" }],
    });
  });

  it("metadata values are escaped and bounded like echoed text; unset ones are left out; numbers are decimal text", () => {
    const long = "x".repeat(300);
    expect(errorDetails(sent(new SessionNotFoundError("a\u202eb\u0000")))?.metadata).toEqual({ session_id: "a\\u202eb\\u0000" });
    expect(errorDetails(sent(new SessionNotFoundError(long)))?.metadata.session_id).toBe(`${"x".repeat(256)}… (300 characters)`);
    expect(errorDetails(sent(new LimitExceededError("over")))?.metadata).toEqual({});
    expect(errorDetails(sent(new ThrottledError("busy", { key: "limits.k", value: 8 }, { retryDelayMs: 120 })))?.metadata).toEqual({
      limit: "limits.k",
      limit_value: "8",
      retry_delay_ms: "120",
    });
  });

  it("a bug is INTERNAL with reason INTERNAL and no metadata; an AbortError is CANCELLED or DEADLINE_EXCEEDED with that reason", () => {
    const bug = sent(new TypeError("x is undefined"));
    expect(bug.code).toBe(status.INTERNAL);
    expect(errorDetails(bug)).toEqual({ reason: "INTERNAL", domain: "contextd.dev", metadata: {}, fieldViolations: [] });
    const abort = Object.assign(new Error("stop"), { name: "AbortError" });
    expect(errorReason(toServiceError(abort))).toBe(ErrorReason.CANCELLED);
    expect(errorReason(toServiceError(abort, { deadlineMs: 0 }))).toBe(ErrorReason.DEADLINE_EXCEEDED);
  });

  it("an error without the trailer, or with one that is not a Status, has no details", () => {
    expect(errorDetails(new Error("plain"))).toBeUndefined();
    expect(errorDetails({ code: status.UNAVAILABLE, metadata: new Metadata() })).toBeUndefined();
    const garbage = new Metadata();
    garbage.set(STATUS_DETAILS_TRAILER, Buffer.from([0xff, 0xff, 0xff]));
    expect(errorDetails({ metadata: garbage })).toBeUndefined();
    expect(errorReason(undefined)).toBeUndefined();
  });
});
