/** What a runtime's credentials allow: which agents' sessions it may act on. */
export interface RuntimeAccess {
  /** Throws PERMISSION_DENIED naming the agent when the credentials do not cover it. */
  checkAgent(agentId: string): void;
  mayActFor(agentId: string): boolean;
}
