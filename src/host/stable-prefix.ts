import { hash } from "node:crypto";
import type { Message } from "../contract/gen/contextd/v1/types.js";

/** How long a prompt prefix stays identical from one Assemble answer of a session to the next. */
export interface StablePrefix {
  messages: number;
  tokens: number;
}

interface Previous {
  /** A digest of the system prompt addition (it may be long). */
  addition: string;
  /** The digest of each message of the previous answer, in order. */
  digests: Float64Array;
}

/**
 * The previous Assemble answer of each session, as digests, to tell the runtime where the prompt
 * prefix a provider's cache can serve ends (AssembleResponse.stable_prefix_messages).
 *
 * In memory and per process, on purpose: the figure is a hint for placing a cache breakpoint, and a
 * wrong one costs at most a cache write, while keeping it in the store would add a write to every
 * Assemble, the hot read path. Bounded by `maxBytes` of digests over all sessions, least recently
 * assembled session evicted first (it then answers 0 once), so no tenant can grow it without bound.
 */
export class StablePrefixes {
  private readonly bySession = new Map<string, Previous>();
  private bytes = 0;

  constructor(private readonly maxBytes = 16 * 1024 * 1024) {}

  /**
   * Measures `messages` (and the addition) against the session's previous answer, then remembers
   * them as its previous answer. `tokensOf` is the host's count of one message.
   */
  measure(sessionId: string, addition: string, messages: readonly Message[], tokensOf: (m: Message) => number): StablePrefix {
    const digests = new Float64Array(messages.length);
    for (let i = 0; i < messages.length; i++) digests[i] = digestOf(messages[i]);
    const additionDigest = hash("sha256", addition, "base64");
    const previous = this.bySession.get(sessionId);
    let stable = 0;
    let tokens = 0;
    if (previous && previous.addition === additionDigest) {
      const n = Math.min(messages.length, previous.digests.length);
      while (stable < n && digests[stable] === previous.digests[stable]) tokens += tokensOf(messages[stable++]);
    }
    this.remember(sessionId, { addition: additionDigest, digests });
    return { messages: stable, tokens };
  }

  private forget(sessionId: string): void {
    const previous = this.bySession.get(sessionId);
    if (!previous) return;
    this.bySession.delete(sessionId);
    this.bytes -= sizeOf(sessionId, previous);
  }

  private remember(sessionId: string, entry: Previous): void {
    this.forget(sessionId);
    const size = sizeOf(sessionId, entry);
    if (size > this.maxBytes) return;
    // Map order is insertion order: re-inserting on every Assemble keeps the least recent first.
    this.bySession.set(sessionId, entry);
    this.bytes += size;
    for (const [oldest, previous] of this.bySession) {
      if (this.bytes <= this.maxBytes) break;
      this.bySession.delete(oldest);
      this.bytes -= sizeOf(oldest, previous);
    }
  }
}

/**
 * The message as a model provider receives it — role, content, tool call id and name, error flag —
 * as a 53-bit digest: what must be identical for its cache to hit.
 *
 * Hashed in JavaScript straight from the fields rather than SHA-256 over their protobuf encoding:
 * that encode and a native Hash object per message of every answer were a fifth of the event
 * loop's time under a busy tenant's Assembles (a CPU profile of the noisy_neighbor bench). Nothing
 * here needs a cryptographic hash — a collision costs at most one provider cache write, and only
 * the session whose own text collided. A stored view message is frozen and never changes, so its
 * digest is computed once and kept beside it for as long as the message lives.
 */
function digestOf(m: Message): number {
  const frozen = Object.isFrozen(m);
  const known = frozen ? digests.get(m) : undefined;
  if (known !== undefined) return known;
  const h = new Digest53();
  h.num(m.role)
    .str(m.toolCallId)
    .str(m.toolName)
    .num(m.isError ? 1 : 0)
    .num(m.content.length);
  for (const { block } of m.content) {
    switch (block?.$case) {
      case "text":
        h.num(1).str(block.value.text).str(block.value.signature).str(block.value.extraJson);
        break;
      case "image":
        h.num(2).str(block.value.mimeType).bytes(block.value.data).str(block.value.uri).str(block.value.extraJson);
        break;
      case "thinking":
        h.num(3)
          .str(block.value.thinking)
          .str(block.value.signature)
          .num(block.value.redacted ? 1 : 0)
          .str(block.value.extraJson);
        break;
      case "toolCall":
        h.num(4).str(block.value.id).str(block.value.name).str(block.value.argumentsJson).str(block.value.signature).str(block.value.extraJson);
        break;
      case undefined:
        h.num(0);
        break;
      default:
        // A block kind added to the contract must be hashed here (this stops compiling until it is).
        block satisfies never;
    }
  }
  const digest = h.finish();
  if (frozen) digests.set(m, digest);
  return digest;
}

/** Digests of stored (frozen) view messages, for as long as each message object lives. */
const digests = new WeakMap<Message, number>();

/**
 * Two independent 32-bit lanes (FNV-1a and a multiply-xorshift) over UTF-16 code units and bytes,
 * every field length-prefixed so that field boundaries cannot shift; linear in the input. The loops
 * keep the lanes in locals: through the fields, a call per character ran four times slower.
 */
class Digest53 {
  private a = 0x811c9dc5;
  private b = 0x9747b28c;

  num(n: number): this {
    let a = Math.imul(this.a ^ (n & 0xffff), 0x01000193);
    let b = Math.imul(this.b ^ (n & 0xffff), 0x5bd1e995);
    b ^= b >>> 15;
    a = Math.imul(a ^ (n >>> 16), 0x01000193);
    b = Math.imul(b ^ (n >>> 16), 0x5bd1e995);
    this.a = a;
    this.b = b ^ (b >>> 15);
    return this;
  }

  str(s: string): this {
    this.num(s.length);
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    this.a = a;
    this.b = b;
    return this;
  }

  /** Bytes as the code units 0–255 of a latin1 string: the same length prefix and units. */
  bytes(data: Uint8Array): this {
    return this.str(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("latin1"));
  }

  /** 21 bits of one lane and 32 of the other, as an integer a double holds exactly. */
  finish(): number {
    return (fmix32(this.a) >>> 11) * 2 ** 32 + fmix32(this.b);
  }
}

/** MurmurHash3's finalizer: every input bit moves every output bit. */
function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function sizeOf(sessionId: string, entry: Previous): number {
  return entry.digests.byteLength + 2 * (sessionId.length + entry.addition.length) + 64;
}
