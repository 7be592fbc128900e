import { QuotaExceededError } from "../contract/errors.js";
import type { AgentUsage } from "../contract/gen/contextd/v1/session.js";
import { quote } from "../contract/quote.js";
import type { TranscriptStore } from "../store/types.js";

/** `quotas` compiled (src/server/settings.ts): 0 is no quota; an agent's own entry replaces a default. */
export interface QuotaSettings {
  maxSessions: number;
  maxStoredBytes: number;
  agents: Readonly<Record<string, { maxSessions?: number; maxStoredBytes?: number }>>;
}

export const NO_QUOTAS: QuotaSettings = { maxSessions: 0, maxStoredBytes: 0, agents: {} };

/** What one call would add to its agent: a session it creates, bytes it writes. */
export interface QuotaClaim {
  agentId: string;
  /** The session the call creates, when it does not exist yet (a session that exists adds nothing). */
  createsSessionId?: string;
  /** The bytes the call appends (the request's encoded messages, or an import's file). */
  bytes: number;
}

/**
 * Per-agent quotas: the sessions an agent holds and the bytes they hold in the store
 * (SessionRecord.storedBytes, kept by the store's triggers). SessionService's session step
 * (session-service.ts) admits each call against them before the host writes anything, so a refused
 * call writes nothing: RESOURCE_EXHAUSTED QUOTA_EXCEEDED naming the quota's key. Checked against
 * what the store holds when the call is admitted: calls of one agent admitted at the same moment
 * may together pass a quota by what they write (the check is not in their write transaction).
 * An agent without a quota costs nothing: no store read.
 */
export class AgentQuotas {
  constructor(
    private readonly store: TranscriptStore,
    private readonly settings: QuotaSettings = NO_QUOTAS,
  ) {}

  /** The quotas of `agentId` (0: none). */
  of(agentId: string): { maxSessions: number; maxStoredBytes: number } {
    const own = this.settings.agents[agentId] ?? {};
    return { maxSessions: own.maxSessions ?? this.settings.maxSessions, maxStoredBytes: own.maxStoredBytes ?? this.settings.maxStoredBytes };
  }

  /** Throws QuotaExceededError when `claim` would take its agent past a quota. */
  async admit(claim: QuotaClaim): Promise<void> {
    const { maxSessions, maxStoredBytes } = this.of(claim.agentId);
    const countsSession = maxSessions > 0 && claim.createsSessionId !== undefined;
    const countsBytes = maxStoredBytes > 0 && claim.bytes > 0;
    if (!countsSession && !countsBytes) return;
    if (countsSession && (await this.store.getSession(claim.createsSessionId!))) return this.admit({ ...claim, createsSessionId: undefined });
    const usage = await this.store.agentUsage(claim.agentId);
    if (countsSession && usage.sessions + 1 > maxSessions) {
      throw new QuotaExceededError(
        `agent ${quote(claim.agentId)} holds ${usage.sessions} sessions, its quota (quotas.max_sessions ${maxSessions}): delete a session or raise the quota`,
        { key: "quotas.max_sessions", value: maxSessions, used: usage.sessions, agentId: claim.agentId },
      );
    }
    if (countsBytes && usage.storedBytes + claim.bytes > maxStoredBytes) {
      throw new QuotaExceededError(
        `agent ${quote(claim.agentId)} holds ${usage.storedBytes} bytes; ${claim.bytes} more would pass its quota (quotas.max_stored_bytes ${maxStoredBytes})`,
        { key: "quotas.max_stored_bytes", value: maxStoredBytes, used: usage.storedBytes, agentId: claim.agentId },
      );
    }
  }

  /** What `agentId` holds and its quotas, as GetSession answers them. */
  async usage(agentId: string): Promise<AgentUsage> {
    const usage = await this.store.agentUsage(agentId);
    const { maxSessions, maxStoredBytes } = this.of(agentId);
    return { agentId, sessions: usage.sessions, storedBytes: usage.storedBytes, maxSessions, maxStoredBytes };
  }
}
