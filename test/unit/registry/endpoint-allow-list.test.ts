/**
 * Red-team findings about engines.allow_endpoints (issue 12), at the allow list itself: what an
 * entry and an endpoint may be, names that resolve outside the list, unix sockets by path prefix.
 * The resolver is a parameter: fixed answers stand in for DNS records an attacker may control; the
 * real resolver is used for `localhost`. The re-check when a name's address changes runs against
 * real engine processes. (test/security/allow-list-findings.test.ts: the same through contextd.)
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allowListEntryProblem, EndpointAllowList, type Lookup } from "../../../src/registry/endpoint-allow-list.js";

/** A resolver with fixed answers, counting the names it was asked for. */
function fixedDns(answers: Record<string, string[]>): Lookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (host: string) => {
    asked.push(host);
    const a = answers[host];
    if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return a.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(lookup, { asked });
}

const refusedFor = async (list: EndpointAllowList, endpoint: string) => {
  const r = await list.check(endpoint);
  if (r.ok) throw new Error(`${endpoint} was allowed (${r.dial.target})`);
  return r.reason;
};

describe("EndpointAllowList: a unix: entry is an absolute directory, and allows only the sockets really inside it", () => {
  let dir: string;
  let outside: string;
  let server: Server;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "allow-unix-"));
    outside = mkdtempSync(path.join(tmpdir(), "allow-outside-"));
    mkdirSync(path.join(dir, "engines"));
    server = createServer();
    await new Promise<void>((r) => server.listen(path.join(outside, "db.sock"), r));
    symlinkSync(path.join(outside, "db.sock"), path.join(dir, "engines", "link.sock"));
    symlinkSync(outside, path.join(dir, "engines", "linkdir"));
    symlinkSync(path.join(dir, "engines"), path.join(dir, "alias"));
  });
  afterAll(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it("a bare unix:, unix:/ or a relative unix: entry is refused at configuration", () => {
    for (const entry of ["unix:", "unix:/", "unix://", "unix:run/engines", "unix:/run/../etc"]) {
      expect(allowListEntryProblem(entry), entry).toBeDefined();
      expect(() => new EndpointAllowList([entry]), entry).toThrow(/engines\.allow_endpoints\[0\]/);
    }
    expect(allowListEntryProblem("unix:")).toContain("every unix socket");
    for (const entry of ["unix:/run/engines/", "127.0.0.1", "::1", "10.0.0.0/8", "fd00::/8", "localhost", "lossless"]) {
      expect(allowListEntryProblem(entry), entry).toBeUndefined();
    }
    for (const entry of ["localhost:50051", "*.example.com", "10.0.0.0/33", "http://x"]) expect(allowListEntryProblem(entry), entry).toBeDefined();
  });

  it("unix: entries are path prefixes: a socket in the directory is allowed, PostgreSQL's is not", async () => {
    const list = new EndpointAllowList([`unix:${dir}/engines/`]);
    const ok = await list.check(`unix:${dir}/engines/a.sock`);
    expect(ok).toMatchObject({ ok: true, dial: { target: `unix:${dir}/engines/a.sock` } });
    expect(await list.check(`unix://${dir}/engines/a.sock`)).toMatchObject({ ok: true });
    expect(await refusedFor(list, "unix:/var/run/postgresql/.s.PGSQL.5432")).toContain("not in a unix: directory");
    expect(await refusedFor(list, `unix:${dir}/engines-evil/a.sock`)).toContain("not in a unix: directory");
    expect(await refusedFor(list, `unix:${dir}/engines/../x.sock`)).toContain('".."');
    expect(await refusedFor(list, "unix:relative.sock")).toContain("not absolute");
    expect(await refusedFor(list, `unix:${dir}/engines/a\u0000.sock`)).toContain("NUL");
  });

  it("a symbolic link in an allowed directory cannot lead out of it; an entry may name its directory through a link", async () => {
    const list = new EndpointAllowList([`unix:${dir}/engines/`]);
    expect(await refusedFor(list, `unix:${dir}/engines/link.sock`)).toContain("symbolic link");
    expect(await refusedFor(list, `unix:${dir}/engines/linkdir/db.sock`)).toContain("symbolic link");
    // An entry naming the directory through a link: sockets at either path, dialled at the real one.
    const aliased = new EndpointAllowList([`unix:${dir}/alias/`]);
    expect(await aliased.check(`unix:${dir}/alias/a.sock`)).toMatchObject({ ok: true, dial: { target: `unix:${dir}/engines/a.sock` } });
    expect(await aliased.check(`unix:${dir}/engines/a.sock`)).toMatchObject({ ok: true, dial: { target: `unix:${dir}/engines/a.sock` } });
  });
});

describe("EndpointAllowList: a listed name is admitted only at addresses the list allows, and dialled at those", () => {
  const dns = fixedDns({
    "engines.example": ["93.184.216.34"],
    "rebind.example": ["127.0.0.1"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": ["93.184.216.34", "192.168.1.1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "pods.example": ["10.1.2.3", "10.1.2.4"],
    "ula.example": ["fd12::1"],
  });
  const list = new EndpointAllowList(
    ["engines.example", "rebind.example", "metadata.example", "mixed.example", "mapped.example", "pods.example", "ula.example", "10.1.0.0/16"],
    dns,
  );

  it("a listed name is dialled at its checked addresses, keeping the name for :authority and TLS", async () => {
    expect(await list.check("engines.example:443")).toEqual({
      ok: true,
      dial: {
        target: "ipv4:93.184.216.34:443",
        options: { "grpc.default_authority": "engines.example:443", "grpc.ssl_target_name_override": "engines.example" },
      },
    });
    expect(await list.check("pods.example:50051")).toMatchObject({ ok: true, dial: { target: "ipv4:10.1.2.3:50051,10.1.2.4:50051" } });
  });

  it("loopback, link-local (cloud metadata), private and unique-local answers are refused, naming the address", async () => {
    expect(await refusedFor(list, "rebind.example:5432")).toMatch(/127\.0\.0\.1 \(loopback\)/);
    expect(await refusedFor(list, "metadata.example:80")).toMatch(/169\.254\.169\.254 \(link-local\)/);
    expect(await refusedFor(list, "mixed.example:80")).toMatch(/192\.168\.1\.1 \(private\)/);
    expect(await refusedFor(list, "mapped.example:80")).toMatch(/127\.0\.0\.1 \(loopback\)/);
    expect(await refusedFor(list, "ula.example:80")).toMatch(/fd12::1 \(unique-local\)/);
  });

  it("a name that is not listed is refused without being resolved", async () => {
    dns.asked.length = 0;
    expect(await refusedFor(list, "attacker.example:80")).toContain("not in engines.allow_endpoints");
    expect(dns.asked).toEqual([]);
  });

  it("with the real resolver: localhost is loopback, admitted only with the loopback addresses listed", async () => {
    expect(await refusedFor(new EndpointAllowList(["localhost"]), "localhost:50051")).toMatch(/resolves to (127\.0\.0\.1|::1) \(loopback/);
    const ok = await new EndpointAllowList(["localhost", "127.0.0.1", "::1"]).check("localhost:50051");
    expect(ok).toMatchObject({ ok: true, dial: { options: { "grpc.default_authority": "localhost:50051" } } });
    expect(ok.ok && ok.dial.target).toMatch(/^ipv4:127\.0\.0\.1:50051|^ipv6:\[::1\]:50051/);
  });

  it("a name that does not answer within the deadline is unresolved, not allowed", async () => {
    const silent = new EndpointAllowList(["slow.example"], () => new Promise(() => {}));
    expect(await silent.check("slow.example:80", Date.now() + 50)).toMatchObject({ ok: false, unresolved: true });
  });
});

describe("EndpointAllowList: a network endpoint is host:port or dns:///host:port with a port in 1..65535; other grpc-js targets are refused", () => {
  const dns = fixedDns({ localhost: ["127.0.0.1"] });
  const list = new EndpointAllowList(["localhost", "127.0.0.1", "::1"], dns);

  it("dns://AUTHORITY/ is refused before any lookup; dns:///host:port is host:port", async () => {
    dns.asked.length = 0;
    expect(await refusedFor(list, "dns://8.8.8.8/localhost:1234")).toContain("dns://AUTHORITY/");
    expect(dns.asked).toEqual([]);
    expect(await list.check("dns:///localhost:1234")).toMatchObject({ ok: true, dial: { target: "ipv4:127.0.0.1:1234" } });
  });

  it("a port outside 1..65535 is refused naming the port", async () => {
    expect(await refusedFor(list, "127.0.0.1:70000")).toContain('port "70000" is not in 1..65535');
    expect(await refusedFor(list, "localhost:0")).toContain("1..65535");
  });

  it("other grpc-js targets are refused naming the accepted forms", async () => {
    for (const e of ["ipv4:127.0.0.1:80", "unix-abstract:engine", "localhost", "http://localhost:80", "[127.0.0.1]:80", "[fe80::1%eth0]:80"]) {
      expect(await refusedFor(list, e), e).toMatch(/host:port|IPv6/);
    }
    expect(await list.check("[::1]:80")).toMatchObject({ ok: true, dial: { target: "ipv6:[::1]:80" } });
    expect(await list.check("[::ffff:127.0.0.1]:80")).toMatchObject({ ok: true, dial: { target: "ipv4:127.0.0.1:80" } });
  });
});
