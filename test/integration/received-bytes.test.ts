/**
 * An appended message is stored as the bytes the runtime sent (src/contract/received-messages.ts),
 * end to end over gRPC: fields this contract does not know come back in Assemble's bytes, the entry id, token count and timestamp are contextd's whatever the runtime
 * put in those fields, and `limits.max_message_bytes` is checked against the bytes sent.
 */
import { Client, credentials, status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lengthDelimitedFields, varintSize, writeVarint } from "../../src/contract/encoded-messages.js";
import {
  AppendMessagesRequest,
  AppendMessagesResponse,
  AssembleRequest,
  AssembleResponse,
  GetTranscriptRequest,
  GetTranscriptResponse,
  SessionServiceService,
} from "../../src/contract/gen/contextd/v1/session.js";
import { Message, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textBlock } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const UNKNOWN_FIELD = Buffer.from([0xa0, 0x06, 0x07]); // field 100 of Message, varint 7
const MAX_MESSAGE_BYTES = 4096;

/** AppendMessagesRequest bytes whose messages are `bodies`, byte for byte. */
function appendRequest(sessionId: string, bodies: Buffer[]): Buffer {
  const head = Buffer.from(AppendMessagesRequest.encode(AppendMessagesRequest.fromPartial({ session: { sessionId } })).finish());
  const fields = bodies.map((b) => {
    const prefix = Buffer.alloc(1 + varintSize(b.length));
    prefix[0] = 0x12; // field 2 (messages), length-delimited
    writeVarint(prefix, 1, b.length);
    return Buffer.concat([prefix, b]);
  });
  return Buffer.concat([head, ...fields]);
}

describe("appended messages, stored as sent", () => {
  let contextd: ContextdProcess;
  let raw: Client;
  let cx: ContextdClient;

  beforeAll(async () => {
    contextd = await startContextd({ config: { limits: { max_message_bytes: MAX_MESSAGE_BYTES } } });
    raw = new Client(contextd.address, credentials.createInsecure());
    cx = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    raw?.close();
    cx?.close();
    await contextd?.cleanup();
  });

  const call = (method: "appendMessages" | "assemble" | "getTranscript", request: Buffer) =>
    new Promise<Buffer>((resolve, reject) =>
      raw.makeUnaryRequest(
        SessionServiceService[method].path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        request,
        (err: ServiceError | null, res?: Buffer) => (err ? reject(err) : resolve(res!)),
      ),
    );

  it("keeps unknown fields, and sets the entry id, token count and timestamp itself", async () => {
    const message = Message.fromPartial({ role: Role.ROLE_USER, content: [textBlock("what is in the box?")], id: "runtime-id", tokenCount: 999 });
    const body = Buffer.concat([Buffer.from(Message.encode(message).finish()), UNKNOWN_FIELD]);
    const before = Date.now();
    const appended = AppendMessagesResponse.decode(await call("appendMessages", appendRequest("sent-bytes", [body])));
    expect(appended.entryIds[0]).toMatch(/^[0-9a-f]{16}$/);
    expect(appended.tokenCounts[0]).toBeGreaterThan(0);
    expect(appended.tokenCounts[0]).not.toBe(999);

    const session = { sessionId: "sent-bytes" };
    const transcript = await call("getTranscript", Buffer.from(GetTranscriptRequest.encode(GetTranscriptRequest.fromPartial({ session })).finish()));
    const assembled = await call("assemble", Buffer.from(AssembleRequest.encode(AssembleRequest.fromPartial({ session, tokenBudget: 16_000 })).finish()));
    // Assemble sends the stored bytes on; GetTranscript answers the decoded entries (fields this
    // version knows), as it always has.
    expect(assembled.includes(UNKNOWN_FIELD)).toBe(true);
    // AssembleResponse field 1: the messages, with the id, count and timestamp contextd set.
    const [sentOn] = lengthDelimitedFields(assembled, (1 << 3) | 2)!;
    const decoded = Message.decode(sentOn);
    expect(decoded).toEqual({ ...message, id: appended.entryIds[0], tokenCount: appended.tokenCounts[0], timestampMs: decoded.timestampMs });
    expect(decoded.timestampMs).toBeGreaterThanOrEqual(before);
    const stored = GetTranscriptResponse.decode(transcript).entries[0];
    expect(stored.entry?.value).toEqual(decoded);
    expect(AssembleResponse.decode(assembled).messages).toEqual([decoded]);
  });

  it("checks limits.max_message_bytes against the bytes sent, naming the message and the limit, and stores nothing", async () => {
    const message = Buffer.from(
      Message.encode(Message.fromPartial({ role: Role.ROLE_USER, content: [textBlock("x".repeat(MAX_MESSAGE_BYTES - 40))] })).finish(),
    );
    expect(message.length).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    const padded = Buffer.concat([message, Buffer.from([0xa2, 0x06, 0x40]), Buffer.alloc(0x40)]); // field 100, 64 bytes
    expect(padded.length).toBeGreaterThan(MAX_MESSAGE_BYTES);
    const err = await call("appendMessages", appendRequest("too-big", [message, padded])).then(
      () => undefined,
      (e: ServiceError) => e,
    );
    expect(err?.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err?.details).toContain(`messages[1] is ${padded.length} bytes, over limits.max_message_bytes (${MAX_MESSAGE_BYTES})`);
    await expect(cx.getTranscript({ session: { sessionId: "too-big" } })).rejects.toMatchObject({ code: status.NOT_FOUND });
    // The same message without the padding fits.
    const ok = AppendMessagesResponse.decode(await call("appendMessages", appendRequest("too-big", [message])));
    expect(ok.entryIds).toHaveLength(1);
  });
});
