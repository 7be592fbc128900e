import { status, type Metadata } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Audited } from "../../contract/rpc-table.js";

/** One audited call as the pipeline saw it, handed to the server's audit trail (src/server/audit-trail.ts). */
export interface AuditedCall {
  action: string;
  target: string;
  method: string;
  requestId: string;
  metadata: Metadata;
  peerCertificate: PeerCertificate | undefined;
  peer: string;
  /** The status code name of the answer, or the row's refinement of an OK one. */
  outcome: string;
}

/** Where the audit step hands a call: written to the store and the log before the caller hears the answer. */
export type AuditSink = (call: AuditedCall) => Promise<void>;

/**
 * The audit step of the server's pipeline (bind-service.ts runs it last, for the rows that declare
 * `audit`): once the call's outcome is known — the handler's answer, or whatever step refused it,
 * authorization included — it describes the call from its row's declaration and hands it to the
 * sink. The request it names is the one the handler got; for a call refused before its request
 * was decoded, the request as it came (undefined when it could not be decoded).
 */
export function auditedCall(
  audit: Audited<unknown, unknown>,
  call: { path: string; requestId: string; metadata: Metadata; peerCertificate: PeerCertificate | undefined; peer: string },
  request: () => unknown,
  answer: { ok: true; response: unknown } | { ok: false; code: status },
): AuditedCall {
  let target = "";
  try {
    target = audit.target(request());
  } catch {
    // An undecodable request: what it was done to is unknown, the call is recorded all the same.
  }
  const outcome = answer.ok ? (audit.outcome?.(answer.response) ?? "OK") : (status[answer.code] ?? String(answer.code));
  return {
    action: audit.action,
    target,
    method: call.path,
    requestId: call.requestId,
    metadata: call.metadata,
    peerCertificate: call.peerCertificate,
    peer: call.peer,
    outcome,
  };
}
