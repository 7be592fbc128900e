import { createHash } from "node:crypto";
import { Message } from "../contract/gen/contextd/v1/types.js";

/** Every field at its default: what a message's digest leaves out. */
const BLANK = Message.fromPartial({});

/** Bytes of one message's digest: 64 bits make a false "identical" vanishingly unlikely. */
const DIGEST_BYTES = 8;

/** How long a prompt prefix stays identical from one Assemble answer of a session to the next. */
export interface StablePrefix {
  messages: number;
  tokens: number;
}

interface Previous {
  /** A digest of the system prompt addition (it may be long). */
  addition: string;
  /** DIGEST_BYTES per message of the previous answer, in order. */
  digests: Buffer;
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
    const digests = Buffer.allocUnsafe(messages.length * DIGEST_BYTES);
    messages.forEach((m, i) => digestOf(m).copy(digests, i * DIGEST_BYTES));
    const additionDigest = createHash("sha256").update(addition).digest("base64");
    const previous = this.bySession.get(sessionId);
    let stable = 0;
    let tokens = 0;
    if (previous && previous.addition === additionDigest) {
      const n = Math.min(messages.length, previous.digests.length / DIGEST_BYTES);
      while (stable < n && sameDigest(digests, previous.digests, stable)) tokens += tokensOf(messages[stable++]);
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

/** The message as a model provider receives it: what must be byte-identical for its cache to hit. */
function digestOf(m: Message): Buffer {
  // A shallow copy over a blank message: fromPartial would deep-copy every block on every Assemble.
  const seen = Message.encode({ ...BLANK, role: m.role, content: m.content, toolCallId: m.toolCallId, toolName: m.toolName, isError: m.isError });
  return createHash("sha256").update(seen.finish()).digest().subarray(0, DIGEST_BYTES);
}

function sameDigest(a: Buffer, b: Buffer, index: number): boolean {
  const at = index * DIGEST_BYTES;
  return a.compare(b, at, at + DIGEST_BYTES, at, at + DIGEST_BYTES) === 0;
}

function sizeOf(sessionId: string, entry: Previous): number {
  return entry.digests.length + 2 * (sessionId.length + entry.addition.length) + 64;
}
