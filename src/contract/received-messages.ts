import type { ServiceDefinition } from "@grpc/grpc-js";
import {
  ENTRY_MESSAGE_TAG,
  idAndCountSize,
  lengthDelimitedFields,
  rememberEncoding,
  rememberedBody,
  varintSize,
  writeIdAndCount,
  writeVarint,
} from "./encoded-messages.js";
import { Message } from "./gen/contextd/v1/types.js";

/**
 * Appended messages stored as the bytes the runtime sent.
 *
 * Encoding an appended message twice after its request was decoded — once to check its size
 * against `limits.max_message_bytes`, once inside the TranscriptEntry payload the store keeps — and
 * deep-copying it on the way (ts-proto's fromPartial) cost a fifth of everything an append
 * allocated (bench `memory`) and much of its CPU. The request's bytes already hold each
 * message encoded, so the deserializer remembers each message's bytes (encoded-messages.ts: the
 * message is frozen and encodes as those bytes plus its id and count), its size is their length,
 * and the store writes them into the entry followed by what the host sets: the timestamp (when the
 * runtime sent none), the entry id and the token count. Protobuf's merge rule (a scalar seen twice
 * takes its last value) makes that decode, in any conformant implementation, exactly as the stored
 * message; fields this contract does not know yet are stored as sent instead of dropped.
 */

/**
 * `definition` with the request deserializer of `method` remembering the bytes of each element of
 * its repeated Message field `field` (the number from the proto): SessionService.AppendMessages.
 */
export function withReceivedMessages<Def extends ServiceDefinition>(definition: Def, method: keyof Def & string, field: number): Def {
  const original = definition[method];
  const tag = (field << 3) | 2;
  const requestDeserialize = (bytes: Buffer) => {
    const request = original.requestDeserialize(bytes) as { messages?: Message[] };
    const messages = request.messages;
    if (messages?.length) {
      const bodies = lengthDelimitedFields(bytes, tag);
      // Each occurrence of a repeated message field is one element, so the two always match for a
      // request that decoded; anything else leaves the messages to be encoded as before.
      if (bodies?.length === messages.length) messages.forEach((m, i) => rememberEncoding(m, bodies[i]));
    }
    return request;
  };
  return { ...definition, [method]: { ...original, requestDeserialize } };
}

/** The encoded size of a message: the bytes it was received or stored as, else its encoding. */
export function encodedSize(message: Message): number {
  return rememberedBody(message)?.length ?? Message.encode(message).finish().length;
}

/** Field 4 of Message (`int64 timestamp_ms`, a varint). */
const TIMESTAMP_TAG = 4 << 3;

export interface StoredMessageFields {
  id: string;
  tokenCount: number;
  /** Set when the host gives the message a timestamp its body does not hold (non-negative). */
  timestampMs?: number;
}

/**
 * A TranscriptEntry payload: `head` (the entry encoded without its message) followed by the message
 * field — `body`, then the fields the host sets. Returns the payload and the message field's bytes
 * within it (what the stored message encodes as).
 */
export function entryPayloadWithBody(head: Uint8Array, body: Uint8Array, set: StoredMessageFields): { payload: Buffer; message: Uint8Array } {
  const idBytes = Buffer.byteLength(set.id);
  const ts = set.timestampMs === undefined ? 0 : 1 + varintSize(set.timestampMs);
  const length = body.length + ts + idAndCountSize(idBytes, set.tokenCount);
  const start = head.length + 1 + varintSize(length);
  const payload = Buffer.allocUnsafe(start + length);
  payload.set(head, 0);
  payload[head.length] = ENTRY_MESSAGE_TAG;
  let pos = writeVarint(payload, head.length + 1, length);
  payload.set(body, pos);
  pos += body.length;
  if (set.timestampMs !== undefined) {
    payload[pos++] = TIMESTAMP_TAG;
    pos = writeVarint(payload, pos, set.timestampMs);
  }
  pos = writeIdAndCount(payload, pos, set.id, idBytes, set.tokenCount);
  if (pos !== payload.length) throw new Error(`entryPayloadWithBody: wrote ${pos} of ${payload.length} bytes`);
  return { payload, message: payload.subarray(start) };
}
