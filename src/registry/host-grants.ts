import { randomBytes, randomUUID } from "node:crypto";
import type { CompactionResult, HostContext } from "../contract/gen/contextd/v1/types.js";
import { PermissionDeniedError, UnauthenticatedError } from "../contract/errors.js";

/** What one host token allows: calls for one engine and one session, until the engine call's deadline. */
export interface HostGrant {
  engineId: string;
  sessionId: string;
  expiresAtMs: number;
  /** Compactions committed through DelegateCompaction during this call (entry id and what it was). */
  delegatedCompactions: Array<{ entryId: string; result: CompactionResult }>;
  /** Set when the engine call ended (answered, failed, timed out or cancelled). */
  ended: boolean;
}

/**
 * Issues the HostContext tokens handed to remote engines with each call, and verifies them when
 * the engine calls HostService. Tokens are random, held only in memory, and die when their call
 * ends — answered, failed, cancelled, or at its deadline — so an engine whose call was already
 * answered by the fallback cannot commit anything late, a leaked token is useless moments later,
 * and it never opens another session.
 *
 * **Several replicas: a token is honoured only by the replica that issued it.** Each call's
 * `HostContext.endpoint` is the issuing replica's own `host_endpoint`, so an engine calls back the
 * replica that called it — which is the one that holds the grant, and the one whose router waits
 * for the engine's answer (and ends the grant with the call). Tokens are not shared through the
 * database: a grant lives for one engine call (milliseconds to seconds) and is checked on every
 * callback, so sharing it would add a database write to every engine call and a read to every
 * callback, and "the call ended, the token is dead" would hold only as fast as the replicas
 * agreed — for nothing, since the issuing replica is up for as long as its call runs. Each
 * replica's `host_endpoint` must therefore be its own address as engines reach it, never the load
 * balancer's (README "Running several replicas").
 *
 * A token names the process that issued it (`<process>.<endpoint, base64url>.<random>`), so one
 * presented at another replica — an engine that called the load balancer instead of
 * HostContext.endpoint, or a token from before a restart — is refused with UNAUTHENTICATED saying
 * where it belongs, rather than a bare "not recognised". The parts are not secrets (the endpoint is
 * in the HostContext anyway); the random part is what grants.
 */
export class HostGrants {
  private readonly grants = new Map<string, HostGrant>();
  private sweepAt = 0;
  /** This process, in every token it issues. */
  private readonly instance = randomBytes(6).toString("hex");
  private prefix: { endpoint: string; value: string } | undefined;

  constructor(public endpoint: string) {}

  issue(engineId: string, sessionId: string, expiresAtMs: number): { host: HostContext; grant: HostGrant } {
    this.sweep();
    // randomUUID draws from a cached CSPRNG pool: 122 random bits, cheaper than randomBytes per call.
    const token = `${this.tokenPrefix()}${randomUUID()}`;
    const grant: HostGrant = { engineId, sessionId, expiresAtMs, delegatedCompactions: [], ended: false };
    this.grants.set(token, grant);
    return { host: { endpoint: this.endpoint, token, expiresAtMs }, grant };
  }

  /** `<process>.<endpoint>.`, recomputed only when `endpoint` changes (it is set once contextd listens). */
  private tokenPrefix(): string {
    if (this.prefix?.endpoint !== this.endpoint) {
      this.prefix = { endpoint: this.endpoint, value: `${this.instance}.${Buffer.from(this.endpoint, "utf8").toString("base64url")}.` };
    }
    return this.prefix.value;
  }

  /** The grant behind `token` when it is live and scoped to `sessionId`. */
  verify(token: string, sessionId: string): HostGrant {
    const grant = token ? this.grants.get(token) : undefined;
    if (!grant) throw new UnauthenticatedError(this.unknownTokenMessage(token));
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

  /** Why `token` is unknown here: issued by another replica (or an earlier run), or not a host token at all. */
  private unknownTokenMessage(token: string): string {
    const [instance, endpoint64, random, extra] = token.split(".");
    if (instance && endpoint64 !== undefined && random && extra === undefined && instance !== this.instance) {
      const issuer = Buffer.from(endpoint64, "base64url").toString("utf8");
      const where = issuer === this.endpoint ? `an earlier run of the contextd at ${issuer}` : `the contextd replica at ${issuer}`;
      return (
        `host token not recognised by this contextd (${this.endpoint}): it was issued by ${where}. ` +
        "A host token is valid only at the HostContext.endpoint of the engine call that carried it, while that call is in progress"
      );
    }
    return "host token not recognised: send the HostContext.token of the engine call in progress, to its HostContext.endpoint";
  }

  private sweep(): void {
    const now = Date.now();
    if (now < this.sweepAt) return;
    this.sweepAt = now + 5_000;
    for (const [token, grant] of this.grants) if (now >= grant.expiresAtMs) this.grants.delete(token);
  }
}
