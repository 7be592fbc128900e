import { BlockList, isIP } from "node:net";

/**
 * `engines.allow_endpoints`: which endpoints the registry may dial. Checked before any connection,
 * so a registration cannot make contextd probe an arbitrary host (SSRF). Entries are host names
 * (`localhost`), IP addresses (`127.0.0.1`, `::1`), CIDR ranges (`10.1.0.0/16`), or `unix:` for
 * any unix socket.
 */
export class EndpointAllowList {
  private readonly hosts = new Set<string>();
  private readonly ranges = new BlockList();
  private readonly unix: boolean;

  constructor(entries: string[]) {
    this.unix = entries.some((e) => e === "unix:" || e.startsWith("unix:"));
    for (const entry of entries) {
      if (entry.startsWith("unix:")) continue;
      const [net, prefix] = entry.split("/");
      const family = isIP(net);
      if (prefix !== undefined && family) this.ranges.addSubnet(net, Number(prefix), family === 6 ? "ipv6" : "ipv4");
      else this.hosts.add(entry.toLowerCase());
    }
  }

  /** Undefined when allowed; otherwise why not. */
  check(endpoint: string): string | undefined {
    if (endpoint.startsWith("unix:")) return this.unix ? undefined : `unix sockets are not in engines.allow_endpoints`;
    const host = hostOf(endpoint);
    if (!host) return `endpoint "${endpoint}" is not host:port or unix:/path`;
    if (this.hosts.has(host.toLowerCase())) return undefined;
    const family = isIP(host);
    if (family && this.ranges.check(host, family === 6 ? "ipv6" : "ipv4")) return undefined;
    return `host "${host}" is not in engines.allow_endpoints`;
  }
}

/** The host part of host:port, [v6]:port, or dns:///host:port. */
export function hostOf(endpoint: string): string | undefined {
  const target = endpoint.replace(/^dns:(\/\/[^/]*)?\/?/, "");
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(target);
  if (bracketed) return bracketed[1];
  const plain = /^([^:\s/]+):(\d+)$/.exec(target);
  return plain ? plain[1] : undefined;
}
