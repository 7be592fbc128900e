/**
 * Over real gRPC, every error status of contextd carries its machine-readable reason
 * (proto/contextd/v1/errors.proto): a google.rpc.Status in the `grpc-status-details-bin` trailer
 * with the call's own code and message, an ErrorInfo (domain "contextd.dev", the ErrorReason's
 * name, its metadata) and, for an invalid request field, a BadRequest — while the status code and
 * message a client saw before stay as they were.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorReason } from "../../src/contract/gen/contextd/v1/errors.js";
import { BadRequest, ErrorInfo } from "../../src/contract/gen/google/rpc/error_details.js";
import { Status } from "../../src/contract/gen/google/rpc/status.js";
import { ContextdClient, errorDetails, errorReason } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { refusal } from "../helpers/registry-client.js";

/** The trailer's google.rpc.Status, decoded here with the generated types alone (not the SDK's helper). */
function trailerStatus(err: ServiceError): Status {
  const [bytes] = err.metadata.get("grpc-status-details-bin");
  expect(Buffer.isBuffer(bytes), "grpc-status-details-bin trailer").toBe(true);
  return Status.decode(bytes as Buffer);
}

function unpack(s: Status): { info?: ErrorInfo; badRequest?: BadRequest; types: string[] } {
  const out: { info?: ErrorInfo; badRequest?: BadRequest; types: string[] } = { types: s.details.map((d) => d.typeUrl) };
  for (const any of s.details) {
    if (any.typeUrl === "type.googleapis.com/google.rpc.ErrorInfo") out.info = ErrorInfo.decode(any.value);
    if (any.typeUrl === "type.googleapis.com/google.rpc.BadRequest") out.badRequest = BadRequest.decode(any.value);
  }
  return out;
}

describe("error statuses carry google.rpc.ErrorInfo / BadRequest details in grpc-status-details-bin", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const session = { sessionId: "error-details" };

  beforeAll(async () => {
    contextd = await startContextd({ config: { limits: { max_messages_per_append: 3 } } });
    cx = new ContextdClient({ address: contextd.address });
    await cx.appendMessages({ session, messages: [user("first")] });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("an unknown session is NOT_FOUND with its message unchanged, and ErrorInfo SESSION_NOT_FOUND in domain contextd.dev naming the session", async () => {
    const err = await refusal(cx.getSession({ session: { sessionId: "nope" } }));
    expect(err.code).toBe(status.NOT_FOUND);
    expect(err.details).toBe('session "nope" not found');

    const s = trailerStatus(err);
    expect(s.code).toBe(status.NOT_FOUND);
    expect(s.message).toBe(err.details);
    const { info, badRequest, types } = unpack(s);
    expect(types).toEqual(["type.googleapis.com/google.rpc.ErrorInfo"]);
    expect(badRequest).toBeUndefined();
    expect(info).toEqual({ reason: "SESSION_NOT_FOUND", domain: "contextd.dev", metadata: { session_id: "nope" } });

    // The SDK's helpers read the same.
    expect(errorReason(err)).toBe(ErrorReason.SESSION_NOT_FOUND);
    expect(errorDetails(err)).toEqual({ reason: "SESSION_NOT_FOUND", domain: "contextd.dev", metadata: { session_id: "nope" }, fieldViolations: [] });
  });

  it("an invalid request field is INVALID_ARGUMENT with its message unchanged, ErrorInfo INVALID_ARGUMENT and a BadRequest naming the field's path", async () => {
    const err = await refusal(
      cx.appendMessages({ session, messages: [user("valid one"), { content: [{ block: { $case: "text", value: { text: "no role" } } }] }] }),
    );
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toMatch(/^messages\[1\]\.role is required \(ROLE_/);

    const s = trailerStatus(err);
    expect(s.code).toBe(status.INVALID_ARGUMENT);
    expect(s.message).toBe(err.details);
    const { info, badRequest } = unpack(s);
    expect(info).toEqual({ reason: "INVALID_ARGUMENT", domain: "contextd.dev", metadata: {} });
    expect(badRequest?.fieldViolations).toEqual([{ field: "messages[1].role", description: err.details, reason: "" }]);
    expect(errorDetails(err)?.fieldViolations).toEqual([{ field: "messages[1].role", description: err.details }]);
  });

  it("a request over a configured limit is LIMIT_EXCEEDED naming the limit's key and value", async () => {
    const err = await refusal(cx.appendMessages({ session, messages: [user("1"), user("2"), user("3"), user("4")] }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toBe("messages has 4 messages, over limits.max_messages_per_append (3)");
    expect(errorReason(err)).toBe(ErrorReason.LIMIT_EXCEEDED);
    expect(errorDetails(err)?.metadata).toEqual({ limit: "limits.max_messages_per_append", limit_value: "3" });
  });

  it("a session id that reaches the error's metadata is escaped as the message quotes it (a bidi override shows as \\u202e)", async () => {
    const id = "evil\u202etxt.exe";
    const err = await refusal(cx.getSession({ session: { sessionId: id } }));
    expect(err.code).toBe(status.NOT_FOUND);
    expect(err.details).toBe('session "evil\\u202etxt.exe" not found');
    expect(errorDetails(err)?.metadata).toEqual({ session_id: "evil\\u202etxt.exe" });
  });

  it("a reused idempotency key is IDEMPOTENCY_KEY_REUSED with the session and the key", async () => {
    await cx.appendMessages({ session, messages: [user("a")], idempotencyKey: "k-1" });
    const err = await refusal(cx.appendMessages({ session, messages: [user("b")], idempotencyKey: "k-1" }));
    expect(err.code).toBe(status.ALREADY_EXISTS);
    expect(errorReason(err)).toBe(ErrorReason.IDEMPOTENCY_KEY_REUSED);
    expect(errorDetails(err)?.metadata).toEqual({ session_id: "error-details", idempotency_key: "k-1" });
  });
});
