import type { Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import { UnauthenticatedError } from "../contract/errors.js";
import type { HostServiceService } from "../contract/gen/contextd/v1/host.js";
import type { RegistryServiceService } from "../contract/gen/contextd/v1/registry.js";
import type { SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import { bearerToken } from "../contract/metadata.js";
import { pageKey, type PageKey } from "../host/page-token.js";
import { agentScope, type RuntimeAccess } from "../host/runtime-access.js";
import { requireSession } from "../host/validate.js";
import type { HostGrant, HostGrants, HostRpc } from "../registry/host-grants.js";
import type { RegistryCaller } from "../registry/registry-service.js";
import { agentAllowed, type Authenticator } from "./auth.js";
import type { Authorize } from "./middleware/bind-service.js";

/**
 * Who may call which method (each service's credentials in proto/contextd/v1/*.proto; docs/security.md,
 * "Principals"), in one table per service, keyed by the methods of the
 * generated service definitions so that a new RPC cannot be added without a rule. Each rule proves
 * the caller from its credentials before the handler runs and gives the handler its principal:
 *
 * - SessionService: a runtime token (the RuntimeAccess says which agents it may act for; the
 *   handler checks the sessions it names, since their stored agent decides);
 * - RegistryService: `reader` — any recognised credential; `owner` — the owner the request claims
 *   (token or mTLS identity); `operator`. Deregistration is `reader` here: only the handler knows
 *   the engine's owner, and asks the principal whether the caller owns it or operates;
 * - HostService: the host token of an engine call in progress, scoped to the request's session.
 */
type Rule = "runtime" | "reader" | "owner" | "operator" | "host-grant";

export const SESSION_RULES: Record<keyof typeof SessionServiceService, Rule> = {
  appendMessages: "runtime",
  assemble: "runtime",
  compact: "runtime",
  afterTurn: "runtime",
  maintain: "runtime",
  prepareSubagentSpawn: "runtime",
  rollbackSubagentSpawn: "runtime",
  endSubagent: "runtime",
  getSession: "runtime",
  listSessions: "runtime",
  getTranscript: "runtime",
  importTranscript: "runtime",
  exportTranscript: "runtime",
  deleteSession: "runtime",
};

export const REGISTRY_RULES: Record<keyof typeof RegistryServiceService, Rule> = {
  registerEngine: "owner",
  deregisterEngine: "reader",
  listEngines: "reader",
  getEngine: "reader",
  watchEngines: "reader",
  quarantineEngine: "operator",
  clearQuarantine: "operator",
};

export const HOST_RULES: Record<keyof typeof HostServiceService, Rule> = {
  readTranscript: "host-grant",
  rewriteTranscriptEntries: "host-grant",
  delegateCompaction: "host-grant",
  complete: "host-grant",
};

function ruleOf(rules: Record<string, Rule>, method: string): Rule {
  const name = method.slice(method.lastIndexOf("/") + 1);
  const rule = rules[name.charAt(0).toLowerCase() + name.slice(1)];
  if (!rule) throw new Error(`no authorization rule for ${method}`);
  return rule;
}

export function sessionAuthorization(auth: Authenticator): Authorize<RuntimeAccess> {
  return (method, _request, metadata) => {
    ruleOf(SESSION_RULES, method);
    const principal = auth.runtime(metadata);
    let key: PageKey | undefined;
    return {
      checkAgent: (agentId: string) => auth.checkAgent(principal, agentId),
      mayActFor: (agentId: string) => agentAllowed(principal.agents, agentId),
      agents: agentScope(principal.agents),
      // As Authenticator.tenantOf names it: the per-token counters are one tenant's.
      tenant: principal.anonymous ? undefined : `runtime ${principal.name}`,
      // The presented token is the one the principal was proven from (auth off: none, one key for all).
      // Derived on first use: only the listing RPCs seal page tokens, and a key costs a sha256 and an
      // HKDF (~40 µs) that every append and Assemble would otherwise pay.
      get pageKey() {
        return (key ??= pageKey(principal.anonymous ? undefined : bearerToken(metadata)));
      },
    };
  };
}

export function registryAuthorization(auth: Authenticator): Authorize<RegistryCaller> {
  return (method, request, metadata, peer) => {
    const rule = ruleOf(REGISTRY_RULES, method);
    if (rule === "owner") auth.owner(metadata, String((request as { owner?: unknown }).owner ?? ""), peer);
    else if (rule === "operator") auth.operator(metadata);
    else auth.anyone(metadata);
    return { requireOwnerOrOperator: (owner) => ownerOrOperator(auth, metadata, owner, peer) };
  };
}

function ownerOrOperator(auth: Authenticator, metadata: Metadata, owner: string, peer: PeerCertificate | undefined): void {
  try {
    auth.owner(metadata, owner, peer);
  } catch (ownerErr) {
    try {
      auth.operator(metadata);
    } catch {
      throw ownerErr;
    }
  }
}

/**
 * The host token, checked against the caller's connection (its address, and its client certificate
 * under mTLS), the request's session and the RPC's host requirement (HostGrants.verify).
 */
export function hostAuthorization(grants: HostGrants): Authorize<HostGrant> {
  return (method, request, metadata, certificate, peer) => {
    ruleOf(HOST_RULES, method);
    const session = requireSession((request as { session?: Parameters<typeof requireSession>[0] }).session);
    const token = bearerToken(metadata);
    if (!token) throw new UnauthenticatedError("missing host token: send metadata 'authorization: Bearer <HostContext.token>'");
    const rpc = method.slice(method.lastIndexOf("/") + 1) as HostRpc;
    return grants.verify(token, session.sessionId, rpc, { peer, certificate });
  };
}
