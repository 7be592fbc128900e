import type { Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { RuntimeAuthorizer } from "../host/session-service.js";
import type { RegistryAuthorizer } from "../registry/registry-service.js";
import type { RuntimeAccess } from "../host/runtime-access.js";
import { agentAllowed, type Authenticator } from "./auth.js";

/** Adapts the Authenticator to the checks each service declares it needs. */
export function authorizers(auth: Authenticator): RuntimeAuthorizer & RegistryAuthorizer {
  return {
    authenticateRuntime(metadata: Metadata): RuntimeAccess {
      const principal = auth.runtime(metadata);
      return {
        checkAgent: (agentId: string) => auth.checkAgent(principal, agentId),
        mayActFor: (agentId: string) => agentAllowed(principal.agents, agentId),
      };
    },
    authorizeReader: (metadata: Metadata) => auth.anyone(metadata),
    authorizeOwner: (metadata: Metadata, owner: string, cert?: PeerCertificate) => void auth.owner(metadata, owner, cert),
    authorizeOperator: (metadata: Metadata) => void auth.operator(metadata),
  };
}
