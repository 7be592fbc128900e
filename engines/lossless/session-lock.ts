/**
 * One engine call at a time per session. Engine calls of one session can overlap (an Ingest from
 * the runtime's next append while an Assemble is still compacting), and compaction reads the raw
 * tail, awaits a summarizer and then commits a leaf that must start exactly where the tail began —
 * so work on a session is serialized. Different sessions run concurrently.
 */
export class SessionLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  async run<T>(sessionId: string, signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(sessionId) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(() => {
        // The caller may have given up while this call waited its turn.
        signal.throwIfAborted();
        return work();
      });
    this.tails.set(sessionId, next);
    try {
      return await next;
    } finally {
      if (this.tails.get(sessionId) === next) this.tails.delete(sessionId);
    }
  }
}
