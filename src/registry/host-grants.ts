import { randomUUID } from "node:crypto";
import type { HostContext } from "../contract/gen/contextd/v1/types.js";
import { PermissionDeniedError, UnauthenticatedError } from "../contract/errors.js";

/** What one host token allows: calls for one engine and one session, until the engine call's deadline. */
export interface HostGrant {
  engineId: string;
  sessionId: string;
  expiresAtMs: number;
  /** Compaction entries committed through DelegateCompaction during this call. */
  delegatedCompactionIds: string[];
  /** Set when the engine call ended (answered, failed, timed out or cancelled). */
  ended: boolean;
}

/**
 * Issues the HostContext tokens handed to remote engines with each call, and verifies them when
 * the engine calls HostService. Tokens are random, held only in memory, and die when their call
 * ends — answered, failed, cancelled, or at its deadline — so an engine whose call was already
 * answered by the fallback cannot commit anything late, a leaked token is useless moments later,
 * and it never opens another session.
 */
export class HostGrants {
  private readonly grants = new Map<string, HostGrant>();
  private sweepAt = 0;

  constructor(public endpoint: string) {}

  issue(engineId: string, sessionId: string, expiresAtMs: number): { host: HostContext; grant: HostGrant } {
    this.sweep();
    // randomUUID draws from a cached CSPRNG pool: 122 random bits, cheaper than randomBytes per call.
    const token = randomUUID();
    const grant: HostGrant = { engineId, sessionId, expiresAtMs, delegatedCompactionIds: [], ended: false };
    this.grants.set(token, grant);
    return { host: { endpoint: this.endpoint, token, expiresAtMs }, grant };
  }

  /** The grant behind `token` when it is live and scoped to `sessionId`. */
  verify(token: string, sessionId: string): HostGrant {
    const grant = token ? this.grants.get(token) : undefined;
    if (!grant) throw new UnauthenticatedError("host token not recognised: send the HostContext.token of the engine call in progress");
    if (grant.ended) {
      throw new UnauthenticatedError("host token no longer valid: the engine call that carried it has ended");
    }
    if (Date.now() >= grant.expiresAtMs) {
      this.grants.delete(token);
      throw new UnauthenticatedError("host token expired: it was valid until the deadline of the engine call that carried it");
    }
    if (grant.sessionId !== sessionId) {
      throw new PermissionDeniedError(`host token is scoped to session "${grant.sessionId}", not "${sessionId}"`);
    }
    return grant;
  }

  private sweep(): void {
    const now = Date.now();
    if (now < this.sweepAt) return;
    this.sweepAt = now + 5_000;
    for (const [token, grant] of this.grants) if (now >= grant.expiresAtMs) this.grants.delete(token);
  }
}
