import { BlockList, isIP } from "node:net";
import { promises as dns } from "node:dns";
import { promises as fs } from "node:fs";
import path from "node:path";
import { quote } from "../contract/quote.js";
import { canonicalIp, isHostName, parseEndpoint, specialUse, unixPathProblem } from "./endpoint-address.js";

/** Resolves a host name to all its addresses (dns.promises.lookup with all: true by default). */
export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

/** Bounds the name resolution of a check made without a deadline. */
const DEFAULT_RESOLVE_MS = 5_000;

/** What contextd dials for an endpoint that passed the check: exactly what was checked. */
export interface DialTarget {
  /** grpc-js target: `ipv4:1.2.3.4:50051,5.6.7.8:50051`, `ipv6:[::1]:50051`, or `unix:/real/path`. */
  target: string;
  /** Channel options: the registered host:port as `:authority`, the name as the TLS server name. */
  options: Record<string, string>;
}

export type EndpointCheck =
  | { ok: true; dial: DialTarget }
  /**
   * `unresolved`: the name (or socket directory) could not be resolved now; it may be later.
   * Its `reason` reads after "not reachable within the admission deadline".
   */
  | { ok: false; reason: string; unresolved?: boolean };

/** The check a RemoteEngine runs before dialling (and again when the health monitor asks). */
export interface EndpointChecker {
  check(endpoint: string, deadlineMs?: number): Promise<EndpointCheck>;
}

type Entry =
  | { kind: "unix"; path: string }
  | { kind: "ip"; address: string; family: 4 | 6 }
  | { kind: "cidr"; net: string; prefix: number; family: 4 | 6 }
  | { kind: "name"; name: string };

/**
 * What is wrong with one `engines.allow_endpoints` entry, if anything (config validation calls
 * this; the constructor refuses an entry it names). A bare `unix:` (or `unix:/`) is refused: it
 * would let any owner make contextd dial any local socket — PostgreSQL's, the Docker daemon's.
 */
export function allowListEntryProblem(entry: string): string | undefined {
  const parsed = parseEntry(entry);
  return typeof parsed === "string" ? parsed : undefined;
}

function parseEntry(entry: string): Entry | string {
  if (entry.startsWith("unix:")) {
    if (/^unix:(\/\/)?\/*$/.test(entry))
      return `${quote(entry)} would allow every unix socket on the machine (PostgreSQL's, the Docker daemon's); name the directory engines' sockets are in (unix:/run/contextd-engines/)`;
    const p = unixPathProblem(entry);
    if (typeof p === "string") return `${quote(entry)}: ${p}; a unix: entry names the directory engines' sockets are in (unix:/run/contextd-engines/)`;
    return { kind: "unix", path: p.path.replace(/\/+$/, "") };
  }
  const cidr = /^([^/]+)\/(\d{1,3})$/.exec(entry);
  if (cidr) {
    const family = isIP(cidr[1]);
    const prefix = Number(cidr[2]);
    if (!family || cidr[1].includes("%")) return `${quote(entry)}: ${quote(cidr[1])} is not an IP address`;
    const net = canonicalIp(cidr[1]);
    if (net.family !== family) return `${quote(entry)}: write an IPv4 range in IPv4 notation`;
    if (prefix > (family === 4 ? 32 : 128)) return `${quote(entry)}: prefix /${prefix} is too long for IPv${family}`;
    return { kind: "cidr", net: net.address, prefix, family: net.family };
  }
  if (isIP(entry)) {
    if (entry.includes("%")) return `${quote(entry)}: zone ids are not accepted`;
    return { kind: "ip", ...canonicalIp(entry) };
  }
  if (isHostName(entry)) return { kind: "name", name: entry.toLowerCase().replace(/\.$/, "") };
  return `${quote(entry)} is not an IP address, a CIDR range, a host name or unix:/directory/ (entries have no port)`;
}

/**
 * `engines.allow_endpoints`: what the registry may dial. Checked before any connection, so a
 * registration cannot make contextd connect wherever its owner likes (SSRF).
 *
 * Entries:
 * - an IP address (`127.0.0.1`, `::1`) or CIDR range (`10.1.0.0/16`): endpoints at those
 *   addresses, and names resolving to them;
 * - a host name (`localhost`, `lossless`): that name, resolved at check time. Every address it
 *   resolves to must be allowed: covered by an IP/CIDR entry, or a public address. Loopback,
 *   private, link-local (169.254.169.254 is the cloud metadata service), unique-local, multicast
 *   and reserved addresses need an IP/CIDR entry (endpoint-address.ts SPECIAL_RANGES) — a listed
 *   name whose DNS record changes must not carry contextd into the local network. A name that is
 *   not listed is refused without being resolved (an owner cannot make contextd query DNS);
 * - `unix:/dir/`: unix sockets in that directory (or that path itself), reached without a symbolic
 *   link below it (the entry may name its directory through a link). There is no "any unix
 *   socket" entry.
 *
 * The check answers with the target to dial — the checked IP addresses (`ipv4:…`/`ipv6:…`, the
 * name kept as `:authority` and TLS server name, so TLS still verifies against the name) or the
 * real socket path — so the connection goes to what was checked, not to what a second DNS answer
 * says (rebinding). RemoteEngine re-runs the check on every health check
 * (HealthMonitor): a name that now resolves outside the list quarantines the engine and is not
 * dialled; allowed new addresses re-point the channel.
 *
 * Left open: a writer of an allowed socket directory can swap a socket for a symbolic link between
 * the check and the connection (the next health check notices). Ports are not restricted: an
 * allowed address is allowed at every port.
 */
export class EndpointAllowList implements EndpointChecker {
  private readonly names = new Set<string>();
  private readonly ranges = new BlockList();
  private readonly unixDirs: string[] = [];

  constructor(
    entries: string[],
    private readonly lookup: Lookup = (host) => dns.lookup(host, { all: true, verbatim: true }),
  ) {
    for (const [i, entry] of entries.entries()) {
      const e = parseEntry(entry.trim());
      if (typeof e === "string") throw new Error(`engines.allow_endpoints[${i}]: ${e}`);
      if (e.kind === "unix") this.unixDirs.push(e.path);
      else if (e.kind === "name") this.names.add(e.name);
      else if (e.kind === "ip") this.ranges.addAddress(e.address, `ipv${e.family}`);
      else this.ranges.addSubnet(e.net, e.prefix, `ipv${e.family}`);
    }
  }

  async check(endpoint: string, deadlineMs = Date.now() + DEFAULT_RESOLVE_MS): Promise<EndpointCheck> {
    const parsed = parseEndpoint(endpoint);
    if ("problem" in parsed) return { ok: false, reason: parsed.problem };
    if (parsed.kind === "unix") return this.checkUnix(parsed.path);
    const { host, port, ip } = parsed;
    if (ip) {
      if (!this.covers(host, ip)) return { ok: false, reason: `address ${host} is not in engines.allow_endpoints` };
      return {
        ok: true,
        dial: { target: ip === 4 ? `ipv4:${host}:${port}` : `ipv6:[${host}]:${port}`, options: { "grpc.default_authority": authority(host, port) } },
      };
    }
    if (!this.names.has(host)) return { ok: false, reason: `host ${quote(host)} is not in engines.allow_endpoints` };
    const resolved = await this.resolve(host, deadlineMs);
    if (!resolved) return { ok: false, unresolved: true, reason: `host ${quote(host)} did not resolve` };
    for (const a of resolved) {
      if (this.covers(a.address, a.family)) continue;
      const special = specialUse(a.address, a.family);
      if (special) {
        return {
          ok: false,
          reason: `host ${quote(host)} resolves to ${a.address} (${special}), which engines.allow_endpoints does not allow (an IP or CIDR entry would)`,
        };
      }
    }
    // One scheme per target: of a name with IPv4 and IPv6 addresses, the family the resolver put first.
    const family = resolved[0].family;
    const list = resolved.filter((a) => a.family === family).map((a) => (family === 4 ? `${a.address}:${port}` : `[${a.address}]:${port}`));
    return {
      ok: true,
      dial: { target: `ipv${family}:${list.join(",")}`, options: { "grpc.default_authority": authority(host, port), "grpc.ssl_target_name_override": host } },
    };
  }

  private covers(address: string, family: 4 | 6): boolean {
    return this.ranges.check(address, `ipv${family}`);
  }

  /** The canonical addresses of `host`, deduplicated; undefined when it does not resolve in time. */
  private async resolve(host: string, deadlineMs: number): Promise<Array<{ address: string; family: 4 | 6 }> | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((done) => (timer = setTimeout(() => done(undefined), Math.max(0, deadlineMs - Date.now()))));
    try {
      const answer = await Promise.race([this.lookup(host).catch(() => undefined), timeout]);
      if (!answer?.length) return undefined;
      const seen = new Map<string, { address: string; family: 4 | 6 }>();
      for (const a of answer) {
        if (!isIP(a.address) || a.address.includes("%")) return undefined;
        const c = canonicalIp(a.address);
        seen.set(c.address, c);
      }
      return [...seen.values()];
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A socket path lexically outside every entry is refused without touching the file system. One
   * inside is walked below its entry's directory (the entry itself may name its directory through
   * a link) with lstat, never following a link: a symbolic link anywhere below the directory is
   * refused with one fixed reason whatever it points at — an existing or a missing file, inside the
   * directory or out of it — so the refusal says nothing about the file system beyond the link.
   * A missing directory below the entry's says only "not reachable", as a closed socket would:
   * which files exist is not the caller's to learn. The real path is what is dialled.
   */
  private async checkUnix(socketPath: string): Promise<EndpointCheck> {
    const dirs = await Promise.all(this.unixDirs.map(async (d) => [d, await realpathOr(d, undefined)] as const));
    const inside = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
    // The most specific entry holding the path (by its own spelling or its real path).
    let best: { base: string; realDir: string | undefined } | undefined;
    for (const [lexical, real] of dirs) {
      const base = inside(socketPath, lexical) ? lexical : real !== undefined && inside(socketPath, real) ? real : undefined;
      if (base !== undefined && (!best || base.length > best.base.length)) best = { base, realDir: real };
    }
    if (!best) return { ok: false, reason: "the unix socket path is not in a unix: directory of engines.allow_endpoints" };
    const unavailable: EndpointCheck = { ok: false, unresolved: true, reason: "UNAVAILABLE" };
    if (best.realDir === undefined) return unavailable;
    const below = socketPath.slice(best.base.length).split("/").filter(Boolean);
    let full = best.realDir;
    for (const [i, name] of below.entries()) {
      full = path.posix.join(full, name);
      const stat = await fs.lstat(full).catch(() => undefined);
      // The socket itself may be missing (not listening yet): dialled, it reads as a closed socket.
      if (!stat) return i === below.length - 1 ? { ok: true, dial: { target: `unix:${full}`, options: {} } } : unavailable;
      if (stat.isSymbolicLink()) return { ok: false, reason: SYMLINK_REFUSAL };
    }
    return { ok: true, dial: { target: `unix:${full}`, options: {} } };
  }
}

/**
 * The one refusal for a unix socket path through a symbolic link below an allowed directory.
 * Fixed text: whether the link's target exists, or where it is, must not change the answer.
 */
export const SYMLINK_REFUSAL =
  "the unix socket path goes through a symbolic link below a unix: directory of engines.allow_endpoints, which is never followed; register the socket's real path";

function authority(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

async function realpathOr<T>(p: string, fallback: T): Promise<string | T> {
  try {
    return await fs.realpath(p);
  } catch {
    return fallback;
  }
}

/** The host of host:port, [v6]:port or dns:///host:port (lower-cased or canonical); undefined otherwise. */
export function hostOf(endpoint: string): string | undefined {
  const p = parseEndpoint(endpoint);
  return "problem" in p || p.kind === "unix" ? undefined : p.host;
}
