import type { ContextdClient, Message } from "contextd/client";

/** A contextd message and its message key (`AppendMessagesRequest.message_keys`). */
export interface KeyedMessage {
  message: Message;
  key: string;
}

export interface KeyedAppenderOptions {
  /** The agent a new session is created under (selects its engine through `slots.agents`). */
  agentId?: string;
  /** Deadline of each AppendMessages call, ms. */
  timeoutMs: number;
}

/** contextd's default `limits.max_messages_per_append` is 1000; a long history goes in batches. */
const APPEND_BATCH = 500;
/** Sessions whose stored message keys an appender remembers; the least recently used is forgotten past it. */
const REMEMBERED_SESSIONS = 1000;

/**
 * Appends a framework's conversation to contextd with message keys, sending only what contextd has
 * not taken yet. The framework integrations (AI SDK, LangChain) hand it the whole conversation of
 * every model call; it remembers, per session, the keys contextd has taken, so a call sends only the
 * new messages (a long tool loop's appends stay linear instead of quadratic). A session it has
 * forgotten (more than REMEMBERED_SESSIONS since) gets its whole conversation once more, which the
 * keys make harmless: contextd stores nothing it holds under the same key again.
 *
 * A failed append (contextd unreachable, refusing) throws, and the keys of the batches that did not
 * go through stay unremembered: the next call sends them again, in order.
 */
export class KeyedAppender {
  // The message keys contextd has taken, per session, most recently used last.
  private readonly stored = new Map<string, Set<string>>();

  constructor(
    private readonly client: ContextdClient,
    private readonly options: KeyedAppenderOptions,
  ) {}

  async append(sessionId: string, conversation: readonly KeyedMessage[]): Promise<void> {
    const held = this.storedKeys(sessionId);
    const fresh = conversation.filter((m) => !held.has(m.key));
    for (let at = 0; at < fresh.length; at += APPEND_BATCH) {
      const batch = fresh.slice(at, at + APPEND_BATCH);
      await this.client.appendMessages(
        {
          session: { sessionId, agentId: this.options.agentId ?? "" },
          messages: batch.map((m) => m.message),
          messageKeys: batch.map((m) => m.key),
        },
        { timeoutMs: this.options.timeoutMs },
      );
      for (const m of batch) held.add(m.key);
    }
  }

  private storedKeys(sessionId: string): Set<string> {
    const keys = this.stored.get(sessionId) ?? new Set<string>();
    this.stored.delete(sessionId);
    this.stored.set(sessionId, keys);
    for (const oldest of this.stored.keys()) {
      if (this.stored.size <= REMEMBERED_SESSIONS) break;
      this.stored.delete(oldest);
    }
    return keys;
  }
}
