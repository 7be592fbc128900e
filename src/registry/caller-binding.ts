import { isIP } from "node:net";
import { certificateNames } from "../contract/certificate-names.js";
import type { PeerCertificate } from "node:tls";
import { UnauthenticatedError } from "../contract/errors.js";
import { quote } from "../contract/quote.js";
import { canonicalIp } from "./endpoint-address.js";
import { hostOf } from "./endpoint-allow-list.js";

/**
 * Where a host token may be presented from, derived from the endpoint the engine registered:
 *
 * - `local`: the engine is on contextd's own host (a unix socket, `localhost`, 127.0.0.0/8, ::1,
 *   0.0.0.0 / ::): its callbacks must come from a loopback address or a unix socket. The exact
 *   loopback address is not compared: any local process can bind any 127.x source address (and an
 *   engine registered at 127.0.0.2 calls a contextd at 127.0.0.1 from 127.0.0.1), so it would tell
 *   no process apart and only break engines.
 * - `address`: the engine registered an IP literal: its callbacks must come from that address. An
 *   engine behind NAT (registered at an address that is not the one its connections leave from)
 *   should register a host name instead, or use mTLS.
 * - `unbound`: a host name. Resolving it on every engine call would put a DNS lookup in the path of
 *   each call (and a stale answer would refuse a moved engine), so callbacks for host-name engines
 *   are bound only by the certificate rule below.
 *
 * Independently of the address: a callback that presents a client certificate verified against
 * `tls.client_ca_file` must present one naming the engine's owner (subject CN or a subjectAltName,
 * as for registration). With `tls.require_client_cert` every connection presents one, so then a
 * token is usable only by a holder of that owner's certificate, wherever it runs.
 *
 * Residual risk, without mTLS: processes on the engine's own host (every local process, for a
 * loopback or unix-socket engine) cannot be told apart by address, and a host-name engine's token
 * is not bound to any address; a token leaked to such a process is usable until its engine call
 * ends (at most that call's deadline), within the engine's session and declared host requirements.
 */
export type CallerBinding = { kind: "local" } | { kind: "address"; address: string } | { kind: "unbound" };

/** The caller of a HostService RPC, as the transport sees it. */
export interface HostCaller {
  /** grpc-js `call.getPeer()`: `ip:port`, or `unknown` for a unix socket. */
  peer?: string;
  /** The client certificate, only when the TLS layer verified it against the client CA. */
  certificate?: PeerCertificate;
}

export function callerBinding(endpoint: string): CallerBinding {
  if (/^unix(-abstract)?:/.test(endpoint)) return { kind: "local" };
  const host = hostOf(endpoint);
  if (host === undefined) return { kind: "unbound" };
  if (host.toLowerCase() === "localhost") return { kind: "local" };
  const ip = normalizeIp(host);
  if (!isIP(ip)) return { kind: "unbound" };
  return isLocalIp(ip) ? { kind: "local" } : { kind: "address", address: ip };
}

/** Throws UNAUTHENTICATED when `caller` is not where (or who) the grant's engine is. */
export function checkCaller(grant: { engineId: string; owner: string; binding: CallerBinding }, caller: HostCaller): void {
  const engine = `engine ${quote(grant.engineId)}`;
  if (caller.certificate) {
    const names = certificateNames(caller.certificate);
    if (!names.includes(grant.owner)) {
      throw new UnauthenticatedError(
        `host token of ${engine} presented with a client certificate for ${quote(names.join(", ") || "(no names)")}, ` +
          `not for its owner ${quote(grant.owner)}: a host token is valid only on a connection with the owner's certificate`,
      );
    }
  }
  const address = peerIp(caller.peer);
  if (grant.binding.kind === "local" && address !== undefined && !isLocalIp(address)) {
    throw new UnauthenticatedError(
      `host token of ${engine} presented from ${quote(address)}: the engine is on contextd's host, so its token is valid only from a loopback address or a unix socket`,
    );
  }
  if (grant.binding.kind === "address" && address !== grant.binding.address) {
    throw new UnauthenticatedError(
      `host token of ${engine} presented from ${quote(address ?? "a unix socket")}: it is valid only from the engine's address ${quote(grant.binding.address)}`,
    );
  }
}

/** The IP of a grpc-js peer string; undefined for a unix socket (`unknown`). */
export function peerIp(peer: string | undefined): string | undefined {
  if (!peer || peer === "unknown") return undefined;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(peer);
  if (bracketed) return normalizeIp(bracketed[1]);
  if (isIP(peer)) return normalizeIp(peer);
  const cut = peer.lastIndexOf(":");
  return normalizeIp(cut > 0 ? peer.slice(0, cut) : peer);
}

/**
 * One spelling of an address, the one the allow-list checks and dials (endpoint-address.ts): an
 * IPv4 peer on a dual-stack socket (`::ffff:10.0.0.1`) is 10.0.0.1, and IPv6 is compared compressed.
 */
function normalizeIp(ip: string): string {
  return isIP(ip) ? canonicalIp(ip).address : ip.toLowerCase();
}

function isLocalIp(ip: string): boolean {
  if (isIP(ip) === 4) return ip.startsWith("127.") || ip === "0.0.0.0";
  return ip === "::1" || ip === "::";
}
