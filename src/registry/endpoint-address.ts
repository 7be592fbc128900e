import { BlockList, isIP } from "node:net";
import path from "node:path";
import { quote } from "../contract/quote.js";

/** What a registration's endpoint may look like; named in every refusal of its form. */
export const ACCEPTED_FORMS = "host:port, [ipv6]:port, dns:///host:port or unix:/absolute/path";

/** sun_path is 108 bytes on Linux, NUL included: a longer path cannot be connected to. */
const MAX_UNIX_PATH_BYTES = 107;

export type ParsedEndpoint =
  /** `path` is absolute and normalized (no `.`/`..` segments, no doubled slashes). */
  | { kind: "unix"; path: string }
  /** `host` is a lower-cased name or a canonical IP literal (`ip` 4 or 6; 0 for a name). */
  | { kind: "host"; host: string; port: number; ip: 0 | 4 | 6 };

/** One DNS label: letters, digits, `-` and `_` (service names), not starting or ending with `-`. */
const HOST_NAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

export function isHostName(text: string): boolean {
  return HOST_NAME.test(text) && isIP(text) === 0;
}

/**
 * The endpoint of a registration, or why it is not one contextd will dial. Only the forms above:
 * a grpc-js target with another scheme (`ipv4:`, `xds:`, `unix-abstract:`) or a DNS authority
 * (`dns://8.8.8.8/name:port`, which would let the caller pick the server that answers for the
 * name) is refused, and so is a port outside 1..65535 — before anything is resolved or dialled.
 */
export function parseEndpoint(endpoint: string): ParsedEndpoint | { problem: string } {
  if (endpoint.startsWith("unix:")) return parseUnix(endpoint);
  let target = endpoint;
  if (target.startsWith("dns://")) {
    if (!target.startsWith("dns:///")) {
      return { problem: `a dns://AUTHORITY/ endpoint would choose its own DNS server; write host:port (accepted: ${ACCEPTED_FORMS})` };
    }
    target = target.slice("dns:///".length);
  }
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(target);
  const plain = bracketed ? undefined : /^([^:[\]\s/]+):(\d+)$/.exec(target);
  const m = bracketed ?? plain;
  if (!m) return { problem: `${quote(endpoint)} is not ${ACCEPTED_FORMS}` };
  const port = Number(m[2]);
  if (!(port >= 1 && port <= 65535)) return { problem: `port ${quote(m[2], 12)} is not in 1..65535` };
  const host = m[1];
  if (bracketed) {
    if (isIP(host) !== 6 || host.includes("%")) return { problem: `${quote(host)} in brackets is not an IPv6 address (zone ids are not accepted)` };
    const c = canonicalIp(host);
    return { kind: "host", host: c.address, port, ip: c.family };
  }
  if (isIP(host) === 4) return { kind: "host", host, port, ip: 4 };
  if (!isHostName(host)) return { problem: `host ${quote(host)} is not a host name or an IPv4 address (accepted: ${ACCEPTED_FORMS})` };
  return { kind: "host", host: host.toLowerCase().replace(/\.$/, ""), port, ip: 0 };
}

function parseUnix(endpoint: string): ParsedEndpoint | { problem: string } {
  const p = unixPathProblem(endpoint);
  if (typeof p === "string") return { problem: p };
  return { kind: "unix", path: p.path };
}

/**
 * The absolute, normalized path of a `unix:` endpoint or allow-list entry (`unix:/p` or
 * `unix:///p`), or what is wrong with it. `..` is refused rather than resolved: a path that climbs
 * out of a directory should not be made to look as if it were inside it.
 */
export function unixPathProblem(text: string): { path: string } | string {
  let rest = text.slice("unix:".length);
  if (rest.startsWith("//")) rest = rest.slice(2);
  if (!rest) return "unix: needs an absolute socket path (unix:/dir/engine.sock)";
  if (rest.includes("\0")) return "a unix socket path must not contain NUL";
  if (!rest.startsWith("/")) return `unix socket path ${quote(rest)} is not absolute`;
  if (rest.split("/").includes("..")) return `unix socket path ${quote(rest)} must not contain ".." segments`;
  const normalized = path.posix.normalize(rest);
  if (Buffer.byteLength(normalized) > MAX_UNIX_PATH_BYTES) return `unix socket path is longer than ${MAX_UNIX_PATH_BYTES} bytes`;
  return { path: normalized };
}

/**
 * An IP address in one spelling: IPv6 compressed and lower-cased (WHATWG URL serialization), and
 * an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) as the IPv4 address it reaches — so it is
 * checked, and dialled, as that address.
 */
export function canonicalIp(address: string): { address: string; family: 4 | 6 } {
  if (isIP(address) === 4) return { address, family: 4 };
  const v6 = new URL(`http://[${address}]`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!mapped) return { address: v6, family: 6 };
  const hi = parseInt(mapped[1], 16);
  const lo = parseInt(mapped[2], 16);
  return { address: `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, family: 4 };
}

/**
 * Ranges a listed host name must not resolve into unless an IP/CIDR entry allows the address:
 * where an engine has no business being, and where an SSRF does harm (the host itself, the
 * private network, link-local — 169.254.169.254 is the cloud metadata service — multicast, and
 * ranges that are not addresses of anyone). IPv6 transition ranges (NAT64, 6to4, Teredo) are in
 * because they can carry an IPv4 address from the ranges above.
 */
const SPECIAL_RANGES: Array<[label: string, family: "ipv4" | "ipv6", net: string, prefix: number]> = [
  ['unspecified/"this network"', "ipv4", "0.0.0.0", 8],
  ["private", "ipv4", "10.0.0.0", 8],
  ["shared (CGNAT)", "ipv4", "100.64.0.0", 10],
  ["loopback", "ipv4", "127.0.0.0", 8],
  ["link-local", "ipv4", "169.254.0.0", 16],
  ["private", "ipv4", "172.16.0.0", 12],
  ["reserved", "ipv4", "192.0.0.0", 24],
  ["documentation", "ipv4", "192.0.2.0", 24],
  ["reserved", "ipv4", "192.88.99.0", 24],
  ["private", "ipv4", "192.168.0.0", 16],
  ["benchmarking", "ipv4", "198.18.0.0", 15],
  ["documentation", "ipv4", "198.51.100.0", 24],
  ["documentation", "ipv4", "203.0.113.0", 24],
  ["multicast", "ipv4", "224.0.0.0", 4],
  ["reserved", "ipv4", "240.0.0.0", 4],
  ["loopback/unspecified/IPv4-compatible", "ipv6", "::", 96],
  ["NAT64", "ipv6", "64:ff9b::", 96],
  ["NAT64", "ipv6", "64:ff9b:1::", 48],
  ["discard", "ipv6", "100::", 64],
  ["reserved (IETF, Teredo)", "ipv6", "2001::", 23],
  ["documentation", "ipv6", "2001:db8::", 32],
  ["6to4", "ipv6", "2002::", 16],
  ["unique-local", "ipv6", "fc00::", 7],
  ["link-local", "ipv6", "fe80::", 10],
  ["site-local", "ipv6", "fec0::", 10],
  ["multicast", "ipv6", "ff00::", 8],
];

const SPECIAL = SPECIAL_RANGES.map(([label, family, net, prefix]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, family);
  return { label, family, list };
});

/** Which special-use range a canonical address is in ("loopback", "private", …), if any. */
export function specialUse(address: string, family: 4 | 6): string | undefined {
  const type = family === 6 ? "ipv6" : "ipv4";
  return SPECIAL.find((s) => s.family === type && s.list.check(address, type))?.label;
}
