import type { AgentScope } from "../store/types.js";
import type { PageKey } from "./page-token.js";

/** What a runtime's credentials allow: which agents' sessions it may act on. */
export interface RuntimeAccess {
  /** Throws PERMISSION_DENIED naming the agent when the credentials do not cover it. */
  checkAgent(agentId: string): void;
  mayActFor(agentId: string): boolean;
  /** The agents it may act for, for the store to filter listings by. */
  readonly agents: AgentScope;
  /** Seals this caller's page tokens (page-token.ts): derived from its credential. */
  readonly pageKey: PageKey;
  /** The runtime token's name, for per-tenant limits (tenant-limits.ts); undefined without auth. */
  readonly tenant?: string;
}

/** A token's agent patterns (`"*"`, `"team-*"`, exact ids) as a store filter. */
export function agentScope(patterns: readonly string[]): AgentScope {
  return {
    exact: patterns.filter((p) => !p.endsWith("*")),
    prefixes: patterns.filter((p) => p.endsWith("*")).map((p) => p.slice(0, -1)),
  };
}
