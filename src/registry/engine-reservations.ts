import { quote } from "../contract/quote.js";

/**
 * Engine ids reserved for one owner each (`auth.owners.<owner>.engines`, and every managed sidecar's
 * own id for its owner). A reserved id can be registered only by its owner — any other owner is
 * refused OWNED_BY_OTHER whether or not the id is registered at the moment — so the id a slot routes
 * an agent's sessions to cannot be squatted while its engine is down, restarting or deregistered
 * (the session transcripts and host tokens it would receive are the prize). Unreserved ids stay
 * first-come, as in OpenClaw; with auth required, no slot may name one (checked at start,
 * src/server/config.ts).
 */
export class EngineReservations {
  private readonly owners = new Map<string, string>();

  /** `[engineId, owner]` pairs; the config check guarantees one owner per id. */
  constructor(entries: Iterable<readonly [string, string]> = []) {
    for (const [id, owner] of entries) this.owners.set(id, owner);
  }

  /** The owner `engineId` is reserved for, if any. */
  ownerOf(engineId: string): string | undefined {
    return this.owners.get(engineId);
  }

  /** Who holds `engineId` instead of `owner` and why, or undefined when `owner` may hold it. */
  refusal(engineId: string, owner: string): { owner: string; message: string } | undefined {
    const reservedFor = this.owners.get(engineId);
    if (reservedFor === undefined || reservedFor === owner) return undefined;
    return { owner: reservedFor, message: `engine ${quote(engineId)} is reserved for owner ${quote(reservedFor)} (auth.owners.${reservedFor}.engines)` };
  }
}
