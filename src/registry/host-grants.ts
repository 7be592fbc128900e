import { randomBytes, randomUUID } from "node:crypto";
import type { HostServiceService } from "../contract/gen/contextd/v1/host.js";
import type { CompactionResult, HostContext } from "../contract/gen/contextd/v1/types.js";
import { PermissionDeniedError, UnauthenticatedError, UnavailableError } from "../contract/errors.js";
import { ErrorReason } from "../contract/gen/contextd/v1/errors.js";
import { quote } from "../contract/quote.js";
import { callerBinding, checkCaller, type CallerBinding, type HostCaller } from "./caller-binding.js";

/**
 * The EngineInfo.host_requirements each HostService RPC needs. ReadTranscript and SearchTranscript need none: they read
 * only the session the engine call is about, which the engine was sent anyway. Keyed by every RPC
 * of the service, so a new one cannot be added without deciding.
 */
export const HOST_RPC_REQUIREMENTS = {
  ReadTranscript: undefined,
  SearchTranscript: undefined,
  RewriteTranscriptEntries: "transcript-rewrite",
  DelegateCompaction: "host-compaction",
  Complete: "llm-complete",
} as const satisfies Record<Capitalize<keyof typeof HostServiceService>, string | undefined>;

export type HostRpc = keyof typeof HOST_RPC_REQUIREMENTS;

/** The engine a grant is for, as the registry holds it (a RegisteredEngine fits). */
export interface GrantedEngine {
  id: string;
  /** The instance called (engine-registry.ts); a grant dies with its instance. */
  instanceId?: string;
  owner: string;
  endpoint: string;
  info: { hostRequirements: readonly string[] };
}

/**
 * What one host token allows: calls for one engine and one session, until the engine call's
 * deadline; only the RPCs the engine's declared host requirements cover; only from where (and, with
 * mTLS, by whom) the engine is (caller-binding.ts).
 */
export interface HostGrant {
  engineId: string;
  /** The instance the call went to: callbacks come from it, and it dies with that instance's standing. */
  instanceId: string;
  /** The engine's owner: a client certificate on a callback must name it. */
  owner: string;
  sessionId: string;
  /** The session's agent, as the call that made the grant resolved it: Complete's spend is charged to it. */
  agentId: string;
  expiresAtMs: number;
  /** EngineInfo.host_requirements when the call was made. */
  hostRequirements: ReadonlySet<string>;
  /** Where callbacks may come from, from the engine's registered endpoint. */
  binding: CallerBinding;
  /** Compactions committed through DelegateCompaction during this call (entry id and what it was). */
  delegatedCompactions: Array<{ entryId: string; result: CompactionResult }>;
  /** Set when the engine call ended (answered, failed, timed out or cancelled). */
  ended: boolean;
  /** Why the engine lost its standing during the call (quarantined, deregistered): the token is dead. */
  revoked?: string;
  /** Ends the engine call this grant belongs to at once (the router sets it when it makes the call). */
  cancel?: (error: EngineRevokedError) => void;
}

/** How an engine lost its standing: what its revoked calls fall back as. */
export type LostStanding = "quarantined" | "deregistered";

/**
 * An engine call ended because its engine lost its standing while it ran — quarantined (by an
 * operator, a health check, another call's failure) or deregistered: its host token dies, its
 * answer is discarded, and the runtime is answered by `legacy` (or, strict, this status).
 */
export class EngineRevokedError extends UnavailableError {
  static override readonly reason = ErrorReason.ENGINE_REVOKED;
  constructor(
    message: string,
    readonly standing: LostStanding,
  ) {
    super(message, { metadata: { standing } });
  }
}

/**
 * Issues the HostContext tokens handed to remote engines with each call, and verifies them when
 * the engine calls HostService. Tokens are random, held only in memory, and die when their call
 * ends — answered, failed, cancelled, or at its deadline — so an engine whose call was already
 * answered by the fallback cannot commit anything late, a leaked token is useless moments later,
 * and it never opens another session.
 *
 * **A token is not a plain bearer token.** It opens only the RPCs its engine declared it needs
 * (HOST_RPC_REQUIREMENTS), and only for a caller where the engine registered — and, with mTLS, one
 * holding the engine owner's certificate (caller-binding.ts, which also says what address binding
 * cannot tell apart). The engine is not asked to present its owner credential on callbacks: the
 * token already names the engine, and engines (OpenClaw's, the Python ones) send only the token.
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
 * balancer's (docs/deployment.md, "Host tokens stay with their replica").
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

  issue(engine: GrantedEngine, session: { sessionId: string; agentId?: string }, expiresAtMs: number): { host: HostContext; grant: HostGrant } {
    this.sweep();
    // randomUUID draws from a cached CSPRNG pool: 122 random bits, cheaper than randomBytes per call.
    const token = `${this.tokenPrefix()}${randomUUID()}`;
    const grant: HostGrant = {
      engineId: engine.id,
      instanceId: engine.instanceId ?? "",
      owner: engine.owner,
      sessionId: session.sessionId,
      agentId: session.agentId ?? "",
      expiresAtMs,
      hostRequirements: new Set(engine.info.hostRequirements),
      binding: callerBinding(engine.endpoint),
      delegatedCompactions: [],
      ended: false,
    };
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

  /**
   * The grant behind `token` when it is live, presented by its engine's side (`caller`), scoped to
   * `sessionId`, and its engine declared the host requirement `rpc` needs.
   */
  verify(token: string, sessionId: string, rpc: HostRpc, caller: HostCaller): HostGrant {
    const grant = token ? this.grants.get(token) : undefined;
    if (!grant) throw new UnauthenticatedError(this.unknownTokenMessage(token));
    if (grant.revoked) throw new UnauthenticatedError(`host token revoked: ${grant.revoked}`);
    if (grant.ended) {
      throw new UnauthenticatedError("host token no longer valid: the engine call that carried it has ended");
    }
    if (Date.now() >= grant.expiresAtMs) {
      this.grants.delete(token);
      throw new UnauthenticatedError("host token expired: it was valid until the deadline of the engine call that carried it");
    }
    checkCaller(grant, caller);
    if (grant.sessionId !== sessionId) {
      throw new PermissionDeniedError(`host token is scoped to session ${quote(grant.sessionId)}, not ${quote(sessionId)}`);
    }
    const needed = HOST_RPC_REQUIREMENTS[rpc];
    if (needed && !grant.hostRequirements.has(needed)) {
      throw new PermissionDeniedError(
        `${rpc} needs host requirement "${needed}", which engine ${quote(grant.engineId)} did not declare (EngineInfo.host_requirements)`,
      );
    }
    return grant;
  }

  /**
   * Ends the standing of every live grant of `engineId` — of its instance `instanceId` only, when
   * given: their tokens are refused from now on (an engine an operator isolated, or that left, must
   * not read or rewrite a transcript with a token it still holds) and their engine calls are ended
   * at once, to be answered by another instance or `legacy`. Returns how many calls were in flight.
   */
  revokeEngine(engineId: string, standing: LostStanding, why: string, instanceId?: string): number {
    let n = 0;
    for (const grant of this.grants.values()) {
      if (grant.engineId !== engineId || grant.ended || grant.revoked) continue;
      if (instanceId && grant.instanceId !== instanceId) continue;
      grant.revoked = why;
      grant.cancel?.(new EngineRevokedError(why, standing));
      n++;
    }
    return n;
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
