import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { CallerContext } from "../registry/engine-dispatch.js";
import type { Router, Selection } from "../registry/router.js";
import { runtimeSettings } from "./runtime-settings.js";

/** Sessions remembered per engine registration before the oldest are forgotten (and bootstrapped again). */
const MAX_REMEMBERED = 100_000;

/**
 * Calls an engine's Bootstrap the first time this contextd routes a session to it (per engine
 * registration, so a re-registered engine is asked again). Engines must treat Bootstrap as
 * idempotent: after a contextd restart the question comes again. Failures are the router's
 * business (quarantine, fallback) and never fail the runtime's call.
 */
export class Bootstraps {
  private readonly done = new Set<string>();
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(private readonly router: Router) {}

  async ensure(selection: Selection, session: SessionRef, caller: CallerContext): Promise<void> {
    const target = selection.target;
    if (target.builtin || !target.info.capabilities?.bootstrap || !target.engine.bootstrap) return;
    const key = `${target.id}\u0000${target.registeredAtMs}\u0000${session.sessionId}`;
    if (this.done.has(key)) return;
    // Concurrent first calls share one Bootstrap.
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.bootstrap(selection, session, caller, key).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    await pending;
  }

  private async bootstrap(selection: Selection, session: SessionRef, caller: CallerContext, key: string): Promise<void> {
    try {
      const routed = await this.router.call(selection, "bootstrap", caller, (engine, ctx) =>
        engine.bootstrap
          ? engine.bootstrap({ session, host: ctx.host, runtimeSettings: runtimeSettings(selection, 0) }, ctx)
          : Promise.resolve({ bootstrapped: false, importedMessages: 0, reason: "no bootstrap" }),
      );
      // Only the engine's own answer counts; a fallback's says nothing about the engine.
      if (routed.engineId !== selection.target.id) return;
      if (this.done.size >= MAX_REMEMBERED) this.done.delete(this.done.values().next().value!);
      this.done.add(key);
    } catch {
      // The router has counted and logged the failure; the runtime's call goes on.
    }
  }
}
