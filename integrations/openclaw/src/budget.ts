import type { RuntimeSettings } from "./openclaw-api.js";

/**
 * The token budget the plugin asks contextd to assemble within, from what OpenClaw passes.
 *
 * OpenClaw calls assemble at the start of each attempt of a turn, with the window less its output
 * reserve and its system prompt (and the prompt), and again before every model request of the tool
 * loop with the whole window less only the turn's pending messages (what it appends after the
 * engine's answer) — no reserve, no system prompt. Neither leaves room for the tool schemas it
 * sends with each request. So the plugin remembers the turn-start budget of each session, gives the
 * loop's calls that budget less the pending messages, and sets aside `toolSchemaTokens` per tool the
 * request carries. Without a turn-start budget (a process that did not see the turn start), the
 * loop's budget is used as it is, less the tools.
 */
export class Budgets {
  private readonly turnStart = new Map<string, number>();

  constructor(
    private readonly options: { defaultTokenBudget: number; toolSchemaTokens: number },
    private readonly maxSessions = 1000,
  ) {}

  /** The budget of an assemble: at a turn's start (`turnStart`) or before a model request of its loop. */
  forAssemble(sessionId: string, p: { tokenBudget?: number; availableTools?: Set<string>; runtimeSettings?: RuntimeSettings }, turnStart: boolean): number {
    const given = p.tokenBudget && p.tokenBudget > 0 ? Math.floor(p.tokenBudget) : undefined;
    if (given === undefined) return this.options.defaultTokenBudget;
    if (turnStart) {
      this.remember(sessionId, given);
      return given;
    }
    const window = p.runtimeSettings?.limits?.promptTokenBudget;
    const start = this.turnStart.get(sessionId);
    const pending = window && window >= given ? window - given : 0;
    const base = start !== undefined ? Math.min(given, start - pending) : given;
    const tools = (p.availableTools?.size ?? 0) * this.options.toolSchemaTokens;
    return Math.max(1, base - tools);
  }

  /** Compact's budget: OpenClaw's (the window, in overflow recovery), or the default. */
  forCompact(tokenBudget?: number): number {
    return tokenBudget && tokenBudget > 0 ? Math.floor(tokenBudget) : this.options.defaultTokenBudget;
  }

  private remember(sessionId: string, budget: number): void {
    this.turnStart.delete(sessionId);
    this.turnStart.set(sessionId, budget);
    // A long-lived Gateway serves many sessions: keep the newest ones.
    if (this.turnStart.size > this.maxSessions) this.turnStart.delete(this.turnStart.keys().next().value!);
  }
}
