import type { Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { RuntimeAuthorizer } from "../host/session-service.js";
import type { RegistryAuthorizer } from "../registry/registry-service.js";
import type { Authenticator } from "./auth.js";

/** Adapts the Authenticator to the checks each service declares it needs. */
export function authorizers(auth: Authenticator): RuntimeAuthorizer & RegistryAuthorizer {
  return {
    authorizeRuntime(metadata: Metadata, sessions: (SessionRef | undefined)[]) {
      const principal = auth.runtime(metadata);
      for (const s of sessions) if (s) auth.checkAgent(principal, s.agentId);
    },
    authorizeReader: (metadata: Metadata) => auth.anyone(metadata),
    authorizeOwner: (metadata: Metadata, owner: string, cert?: PeerCertificate) => void auth.owner(metadata, owner, cert),
    authorizeOperator: (metadata: Metadata) => void auth.operator(metadata),
  };
}
