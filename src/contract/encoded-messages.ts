import { type BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { ServiceDefinition } from "@grpc/grpc-js";
import { Message } from "./gen/contextd/v1/types.js";

/**
 * Stored messages sent on as the bytes they were stored as.
 *
 * A message of a session's active view travels on every Assemble twice — to the engine in its
 * request, to the runtime in the answer — and each ts-proto encode of the ~25 kB view cost about as
 * much CPU as the store read itself, in a CPU profile of contextd. The store already holds each
 * message encoded (inside its TranscriptEntry payload), so a view message read from the store
 * remembers the bytes of its body and the few bytes of what the host sets on it (entry id, stored
 * token count), and the serializers below write those bytes instead of encoding the object again.
 *
 * The suffix relies on protobuf's merge rule — a scalar field seen twice takes its last value — so
 * `body ‖ suffix` decodes, in every conformant implementation, as the stored message with the id and
 * count the host gives it, exactly what encoding the decoded object would have produced (fields
 * the contract does not know yet are even kept, where a decode and re-encode would drop them).
 *
 * The remembered bytes are only right while the object is unchanged, so such a message is frozen:
 * code that tried to edit a stored message in place would throw instead of sending stale bytes
 * (edits make a copy — `{ ...message, … }` — which has no remembered bytes and is encoded anew).
 */
/** Where a view message keeps its stored body: a non-enumerable property, so a copy (`{ ...m }`) has none. */
const BODY = Symbol("contextd.storedMessageBody");

type WithBody = Message & { [BODY]?: Uint8Array };

/** Field 5 of TranscriptEntry (`oneof entry { Message message = 5; }`). */
export const ENTRY_MESSAGE_TAG = (5 << 3) | 2;

/**
 * The encoded body of the message inside a TranscriptEntry payload, found by walking the wire format
 * (nothing is decoded); undefined when the entry holds no message, holds the field more than once
 * (a merge the host does not reproduce: the caller then encodes the decoded message), or is not
 * well-formed.
 */
export function entryMessageBytes(payload: Uint8Array): Uint8Array | undefined {
  const found = lengthDelimitedFields(payload, ENTRY_MESSAGE_TAG);
  return found?.length === 1 ? found[0] : undefined;
}

/**
 * Every occurrence of the length-delimited field `tag` (field number << 3 | 2) at the top level of
 * `bytes`, in order, as views of `bytes`; undefined when `bytes` is not well-formed protobuf.
 * Hand-written because it runs for every message of every view read and every append: a
 * BinaryReader per message cost more than the walk.
 */
export function lengthDelimitedFields(bytes: Uint8Array, tag: number): Uint8Array[] | undefined {
  let pos = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (pos >= bytes.length) return -1;
      const b = bytes[pos++];
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    return -1;
  };
  const found: Uint8Array[] = [];
  while (pos < bytes.length) {
    const t = varint();
    switch (t & 7) {
      case 0: // varint: skip its bytes (64-bit values may be 10 long)
        while (pos < bytes.length && bytes[pos++] >= 0x80);
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2: {
        const len = varint();
        if (len < 0 || pos + len > bytes.length) return undefined;
        if (t === tag) found.push(bytes.subarray(pos, pos + len));
        pos += len;
        break;
      }
      default:
        return undefined;
    }
    if (t < 0 || pos > bytes.length) return undefined;
  }
  return found;
}

/**
 * Remembers that `message` — decoded from `body`, then given the entry's `id` and stored
 * `tokenCount` — encodes as `body` followed by those two fields, and freezes it. Returns the message.
 */
export function rememberEncoding(message: Message, body: Uint8Array): Message {
  Object.defineProperty(message, BODY, { value: body });
  return Object.freeze(message);
}

/** The bytes `message` remembers (see rememberEncoding), if it does. */
export function rememberedBody(message: Message): Uint8Array | undefined {
  return (message as WithBody)[BODY];
}

/**
 * `message` with another entry id and token count, still remembering its body: the two are exactly
 * what the serializers write after the body, so the copy needs no encoding of its own either.
 */
export function withIdAndCount(message: Message, id: string, tokenCount: number): Message {
  const copy = { ...message, id, tokenCount };
  const body = rememberedBody(message);
  return body ? rememberEncoding(copy, body) : copy;
}

/** Bytes of `n` (a non-negative safe integer: lengths, counts, timestamps) as a protobuf varint. */
export function varintSize(n: number): number {
  let size = 1;
  for (; n >= 0x80; size++) n = Math.floor(n / 0x80);
  return size;
}

/** Writes `n` (a non-negative safe integer) as a varint at `pos`; returns the position after it. */
export function writeVarint(out: Buffer, pos: number, n: number): number {
  for (; n >= 0x80; n = Math.floor(n / 0x80)) out[pos++] = (n % 0x80) | 0x80;
  out[pos++] = n;
  return pos;
}

/** Message field 1 (`string id`) and field 11 (`uint32 token_count`): what the host sets after a body. */
const ID_TAG = (1 << 3) | WireType.LengthDelimited;
const TOKEN_COUNT_TAG = (11 << 3) | WireType.Varint;

/** Bytes of the id and token count fields written after a remembered body (`idBytes`: the id's UTF-8 length). */
export function idAndCountSize(idBytes: number, tokenCount: number): number {
  return 1 + varintSize(idBytes) + idBytes + 1 + varintSize(tokenCount);
}

/** Writes the id and token count fields at `pos` (see idAndCountSize); returns the position after them. */
export function writeIdAndCount(out: Buffer, pos: number, id: string, idBytes: number, tokenCount: number): number {
  out[pos++] = ID_TAG;
  pos = writeVarint(out, pos, idBytes);
  pos += out.write(id, pos, "utf8");
  out[pos++] = TOKEN_COUNT_TAG;
  return writeVarint(out, pos, tokenCount);
}

interface Encoder<T> {
  encode(message: T, writer?: BinaryWriter): BinaryWriter;
}

/** One message's part of the field: remembered bytes, or a fresh encoding. */
interface Part {
  body: Uint8Array;
  /** For a remembered body: the entry id and stored count written after it (the last value wins). */
  id?: string;
  idBytes: number;
  tokenCount: number;
  /** Bytes of the embedded message (without its tag and length prefix). */
  length: number;
}

/**
 * A serializer for a message type whose repeated Message field `field` is `messages`: every other
 * field as ts-proto encodes it, then the messages, each a remembered body followed by its id and
 * count — protobuf fields may come in any order. The answer is sized before it is written, so each
 * stored body is copied once (a growing writer copied the ~25 kB of a view several times).
 */
export function splicingSerializer<T extends { messages: Message[] }>(type: Encoder<T>, field: number): (value: T) => Buffer {
  const tagByte = (field << 3) | WireType.LengthDelimited; // fields 1–15: a one-byte tag
  if (field > 15) throw new Error(`splicingSerializer: field ${field} needs a multi-byte tag`);
  return (value) => {
    const head = type.encode({ ...value, messages: [] }).finish();
    const parts: Part[] = [];
    let size = head.length;
    for (const m of value.messages as readonly WithBody[]) {
      const body = m[BODY];
      let part: Part;
      if (body) {
        const idBytes = Buffer.byteLength(m.id);
        part = { body, id: m.id, idBytes, tokenCount: m.tokenCount, length: body.length + idAndCountSize(idBytes, m.tokenCount) };
      } else {
        const encoded = Message.encode(m).finish();
        part = { body: encoded, idBytes: 0, tokenCount: 0, length: encoded.length };
      }
      parts.push(part);
      size += 1 + varintSize(part.length) + part.length;
    }
    const out = Buffer.allocUnsafe(size);
    out.set(head, 0);
    let pos = head.length;
    for (const part of parts) {
      out[pos++] = tagByte;
      pos = writeVarint(out, pos, part.length);
      out.set(part.body, pos);
      pos += part.body.length;
      if (part.id !== undefined) pos = writeIdAndCount(out, pos, part.id, part.idBytes, part.tokenCount);
    }
    if (pos !== size) throw new Error(`splicingSerializer: wrote ${pos} of ${size} bytes`);
    return out;
  };
}

/**
 * `definition` with the `side` serializer of `method` splicing remembered message bytes of the
 * repeated Message field `field` (the number from the proto). For the calls that carry a session's
 * view: ContextEngineService.Assemble's request (registry → engine), SessionService.Assemble's answer.
 */
export function withSplicedMessages<Def extends ServiceDefinition, T extends { messages: Message[] }>(
  definition: Def,
  method: keyof Def & string,
  side: "request" | "response",
  type: Encoder<T>,
  field: number,
): Def {
  const serialize = splicingSerializer(type, field);
  return { ...definition, [method]: { ...definition[method], [side === "request" ? "requestSerialize" : "responseSerialize"]: serialize } };
}
