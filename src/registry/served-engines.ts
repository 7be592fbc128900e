import type { DeletionStore } from "../store/deletions.js";

/** Pairs remembered as recorded; past it the memory starts again (a pair recorded twice costs one idempotent write). */
const REMEMBERED = 100_000;

/**
 * Records, before a sidecar is first called for a session, that it serves the session
 * (DeletionStore.recordSessionEngine): a deletion of the session then sends it ForgetSession,
 * whichever engine the slot selects by then. Once per session and engine as far as this process
 * remembers (up to 100,000 pairs), so a turn does not pay a write per engine call. A failed
 * record fails the call (UNAVAILABLE, like any store failure), before the engine holds anything
 * it would not be told to forget.
 */
export class ServedEngines {
  private recorded = new Set<string>();

  constructor(private readonly store: Pick<DeletionStore, "recordSessionEngine">) {}

  async record(sessionId: string, engineId: string): Promise<void> {
    if (!sessionId) return;
    const key = `${engineId}\u0000${sessionId}`;
    if (this.recorded.has(key)) return;
    await this.store.recordSessionEngine(sessionId, engineId, Date.now());
    if (this.recorded.size >= REMEMBERED) this.recorded = new Set();
    this.recorded.add(key);
  }
}
