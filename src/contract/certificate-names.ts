import type { PeerCertificate } from "node:tls";

/**
 * The names a client certificate proves: its subject CN and subjectAltName values. An owner is
 * proven by a verified certificate naming it — at registration (src/server/auth.ts) and on the
 * HostService callbacks of its engines (src/registry/caller-binding.ts): one rule for both.
 */
export function certificateNames(cert: PeerCertificate): string[] {
  const cn = cert.subject?.CN;
  const sans = (cert.subjectaltname ?? "").split(",").map((s) => s.trim().replace(/^[A-Za-z ]+:/, ""));
  return [...(Array.isArray(cn) ? cn : cn ? [cn] : []), ...sans].filter((s) => s !== "");
}
