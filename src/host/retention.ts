import type { ExpiringSession, RetentionRule } from "../store/types.js";
import { expiryOf } from "../store/deletions.js";

/** One retention limit pair; either may be absent (that limit does not apply). */
export interface RetentionLimits {
  maxIdleMs?: number;
  maxAgeMs?: number;
}

/** `retention`: the default limits and per-agent ones (an agent's entry replaces the default whole). */
export interface RetentionSettings {
  default: RetentionLimits;
  agents: Record<string, RetentionLimits>;
  /** How often the sweep runs (`retention.sweep_interval`). */
  sweepIntervalMs: number;
}

/**
 * Which sessions retention expires: a session of an agent listed under `retention.agents` by that
 * entry's limits, every other one by the default. A session expires at the earlier of its last
 * activity + `max_idle` and its creation + `max_age` (each only when set; neither: never).
 */
export class RetentionPolicy {
  constructor(readonly settings: RetentionSettings) {}

  /** Whether any rule can expire anything (the sweep does nothing otherwise). */
  get active(): boolean {
    return this.rules().some((r) => r.maxIdleMs !== undefined || r.maxAgeMs !== undefined);
  }

  /** The rules the store queries: one per listed agent, then the default over every other agent. */
  rules(): RetentionRule[] {
    const listed = Object.keys(this.settings.agents);
    return [
      ...listed.map((agentId) => ({ agentId, excludeAgents: [], ...this.settings.agents[agentId] })),
      { excludeAgents: listed, ...this.settings.default },
    ];
  }

  /** When retention deletes a session (0: never). */
  expiresAtMs(s: { agentId: string; createdAtMs: number; updatedAtMs: number }): number {
    const limits = this.settings.agents[s.agentId] ?? this.settings.default;
    const at = expiryOf(limits, s);
    return Number.isFinite(at) ? at : 0;
  }
}

/** The sessions of several rules' answers, soonest first, at most `limit`. */
export function soonestFirst(lists: ExpiringSession[][], limit: number): ExpiringSession[] {
  return lists
    .flat()
    .sort((a, b) => a.expiresAtMs - b.expiresAtMs || (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0))
    .slice(0, limit);
}
