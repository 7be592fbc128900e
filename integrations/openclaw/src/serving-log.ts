import { Mode } from "contextd/client";
import type { PluginLogger } from "./openclaw-api.js";

/**
 * What the plugin tells OpenClaw's log about who serves a session, once per change rather than on
 * every call: the first turn contextd serves it (a positive sign that contextd, not OpenClaw's own
 * engine, decides the context), each episode of contextd answering from its `legacy` engine because
 * the selected engine is unavailable (once when it starts, with contextd's reason; once when it
 * ends), and each episode of contextd being unreachable.
 */
export class ServingLog {
  private readonly state = new Map<string, string>();

  constructor(
    private readonly log: PluginLogger,
    private readonly address: string,
    private readonly maxSessions = 1000,
  ) {}

  served(sessionId: string, answer: { engineId: string; mode: Mode; fallbackReason: string }): void {
    const previous = this.state.get(sessionId);
    if (answer.mode === Mode.MODE_FALLBACK) {
      const now = `fallback:${answer.fallbackReason}`;
      if (previous !== now)
        this.log.warn(
          `contextd: session ${sessionId} is served by contextd's ${answer.engineId} engine instead of the selected one: ${answer.fallbackReason || "no reason given"}`,
        );
      return this.set(sessionId, now);
    }
    const now = `normal:${answer.engineId}`;
    if (previous === now) return;
    if (previous?.startsWith("fallback:")) this.log.info(`contextd: session ${sessionId} is served by engine ${answer.engineId} again`);
    else if (previous?.startsWith("down"))
      this.log.info(`contextd: reached contextd at ${this.address} again; session ${sessionId} is served by engine ${answer.engineId}`);
    else this.log.info(`contextd: session ${sessionId} is served by contextd at ${this.address} (engine ${answer.engineId})`);
    this.set(sessionId, now);
  }

  /**
   * A turn was committed to contextd. Said only when nothing was said of the session before in this
   * process: a session's first turn has no history for contextd to assemble yet, so this is then the
   * first sign that contextd holds it.
   */
  committed(sessionId: string): void {
    const previous = this.state.get(sessionId);
    if (previous !== undefined && previous !== "down") return;
    this.log.info(`contextd: session ${sessionId} is kept by contextd at ${this.address}`);
    this.set(sessionId, "committed");
  }

  /** contextd could not be reached (or refused the call): said once per episode. */
  unreachable(sessionId: string, what: string, reason: string): void {
    if (this.state.get(sessionId) === "down") return;
    this.log.warn(`contextd: ${what}: ${reason}`);
    this.set(sessionId, "down");
  }

  private set(sessionId: string, value: string): void {
    this.state.delete(sessionId);
    this.state.set(sessionId, value);
    if (this.state.size > this.maxSessions) this.state.delete(this.state.keys().next().value!);
  }
}
