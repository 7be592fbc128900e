import type { Logger } from "pino";
import { TurnMaintenanceMode, type EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";

/** Sessions whose background maintenance may run at once, across every engine and tenant. */
export const BACKGROUND_MAINTENANCE_CONCURRENCY = 2;
/** Sessions that may wait for it; one more is not scheduled (and says so in the log). */
export const BACKGROUND_MAINTENANCE_BACKLOG = 1024;

/** Whether an engine asked for its maintenance after the turn instead of in the runtime's calls. */
export function wantsBackgroundMaintenance(info: EngineInfo): boolean {
  return info.turnMaintenanceMode === TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND && Boolean(info.capabilities?.maintain);
}

/**
 * Maintain, run by the host after a turn was answered, for engines that declare
 * TURN_MAINTENANCE_MODE_BACKGROUND (engine.proto): the runtime's AfterTurn never waits for it.
 *
 * - One session's maintenance runs once at a time. A turn that ends while it runs asks for one more
 *   run after it (never more than one: the next run sees every turn before it), so maintenance
 *   always follows the latest turn.
 * - At most BACKGROUND_MAINTENANCE_CONCURRENCY sessions' maintenance runs at once, the others wait in
 *   order, at most BACKGROUND_MAINTENANCE_BACKLOG of them: background work is bounded whatever the
 *   tenants do, and no runtime's call waits behind it.
 * - Each run is an ordinary engine call (`run`: SessionHost routes it): under the engine's maintain
 *   deadline, with a host token for the session, so what the engine rewrites through HostService
 *   lands as it would from SessionService.Maintain. A failure is the engine's like any other
 *   (quarantine, fallback to legacy, which has no maintenance) and is logged; nobody is answered.
 * - `stop` drops what waits and cancels what runs (contextd is shutting down).
 */
export class BackgroundMaintenance {
  /** Sessions scheduled or running, by id: `again` when a turn ended while it ran. */
  private readonly sessions = new Map<string, { again: boolean }>();
  private readonly waiting: SessionRef[] = [];
  private running = 0;
  private readonly stopping = new AbortController();
  private readonly runs = new Set<Promise<void>>();
  private warnedFull = false;

  constructor(
    private readonly run: (session: SessionRef, signal: AbortSignal) => Promise<void>,
    private readonly log: Logger,
    private readonly concurrency = BACKGROUND_MAINTENANCE_CONCURRENCY,
    private readonly backlog = BACKGROUND_MAINTENANCE_BACKLOG,
  ) {}

  /** Asks for `session`'s maintenance after the turn that just ended. */
  schedule(session: SessionRef): void {
    if (this.stopping.signal.aborted) return;
    const known = this.sessions.get(session.sessionId);
    if (known) {
      known.again = true;
      return;
    }
    if (this.waiting.length >= this.backlog) {
      if (!this.warnedFull) this.log.warn({ backlog: this.backlog }, "background maintenance is full; a session's maintenance was not scheduled");
      this.warnedFull = true;
      return;
    }
    this.warnedFull = false;
    this.sessions.set(session.sessionId, { again: false });
    this.waiting.push(session);
    this.next();
  }

  /** Scheduled or running sessions (for tests and metrics). */
  get pending(): number {
    return this.sessions.size;
  }

  start(): void {}

  async stop(): Promise<void> {
    this.stopping.abort(new Error("contextd is shutting down"));
    this.waiting.length = 0;
    await Promise.all([...this.runs]);
    this.sessions.clear();
  }

  private next(): void {
    while (this.running < this.concurrency && this.waiting.length > 0 && !this.stopping.signal.aborted) {
      const session = this.waiting.shift()!;
      this.running++;
      const run = this.once(session).finally(() => {
        this.running--;
        this.runs.delete(run);
        const state = this.sessions.get(session.sessionId);
        if (state?.again && !this.stopping.signal.aborted) {
          state.again = false;
          this.waiting.push(session);
        } else {
          this.sessions.delete(session.sessionId);
        }
        this.next();
      });
      this.runs.add(run);
    }
  }

  private async once(session: SessionRef): Promise<void> {
    try {
      await this.run(session, this.stopping.signal);
    } catch (err) {
      if (!this.stopping.signal.aborted) this.log.warn({ err, sessionId: session.sessionId }, "background maintenance failed");
    }
  }
}
