import type { Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import { UnauthenticatedError } from "../contract/errors.js";
import { bearerToken } from "../contract/metadata.js";
import { pageKey, type PageKey } from "../host/page-token.js";
import { agentScope, type RuntimeAccess } from "../host/runtime-access.js";
import { requireSession } from "../host/validate.js";
import type { HostGrant, HostGrants, HostRpc } from "../registry/host-grants.js";
import type { RegistryCaller, RegistryRule } from "../registry/registry-service.js";
import { agentAllowed, type Authenticator } from "./auth.js";
import type { Authorize } from "./middleware/bind-service.js";

/**
 * The authorization step's rules (contract/rpc-table.ts, AuthRule), as each service's table states
 * them per RPC (src/host/session-service.ts, src/host/host-service.ts,
 * src/registry/registry-service.ts): each proves the caller from its credentials before the
 * request is used, and gives the handler its principal (each service's credentials in
 * proto/contextd/v1/*.proto; docs/security.md, "Principals"):
 *
 * - `runtime` (SessionService): a runtime token; the RuntimeAccess says which agents it may act for
 *   (the session step admits the sessions the request names against it: their stored agent decides);
 * - `reader`, `owner`, `operator` (RegistryService): any recognised credential; the owner the
 *   request claims (token or mTLS identity); an operator;
 * - `host-grant` (HostService): the host token of an engine call in progress, scoped to the
 *   request's session and the RPC.
 */
export function sessionAuthorization(auth: Authenticator): Authorize<RuntimeAccess, "runtime"> {
  return (_rule, _method, _request, metadata) => {
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

export function registryAuthorization(auth: Authenticator): Authorize<RegistryCaller, RegistryRule> {
  return (rule, _method, request, metadata, peer) => {
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
export function hostAuthorization(grants: HostGrants): Authorize<HostGrant, "host-grant"> {
  return (_rule, method, request, metadata, certificate, peer) => {
    const session = requireSession((request as { session?: Parameters<typeof requireSession>[0] }).session);
    const token = bearerToken(metadata);
    if (!token) throw new UnauthenticatedError("missing host token: send metadata 'authorization: Bearer <HostContext.token>'");
    const rpc = method.slice(method.lastIndexOf("/") + 1) as HostRpc;
    return grants.verify(token, session.sessionId, rpc, { peer, certificate });
  };
}
