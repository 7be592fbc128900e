/**
 * Red-team findings about engines.allow_endpoints (issue 12), through a real contextd process: an
 * owner made contextd dial PostgreSQL's unix socket, pick its DNS server (dns://AUTHORITY/), hand a
 * port over 65535 to the dialler, and learn which files exist from an UNREACHABLE refusal.
 * (test/unit/registry/endpoint-allow-list.test.ts: the allow list itself, with fixed DNS answers.)
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { registryClient } from "../helpers/registry-client.js";
import { user } from "../fixtures/messages.js";

const POSTGRES_SOCKET = "/var/run/postgresql/.s.PGSQL.5432";
/** Transport words that would tell an owner what is on contextd's file system or network. */
const ERRNO = /ENOENT|ECONNREFUSED|EACCES|ENOTDIR|ENOTSOCK|connect |No such file/;

describe("finding: allow-list bypasses — endpoints contextd must not dial", () => {
  let dir: string;
  let sockets: string;
  let contextd: ContextdProcess;
  let registry: ReturnType<typeof registryClient>;
  let tcpEngine: EngineProcess;
  /** A local service outside the allowed directory (PostgreSQL's stand-in): counts who connects. */
  let sentinel: Server;
  const sentinelConnections: number[] = [];
  const req = (engineId: string, endpoint: string) => ({ engineId, owner: "acme", endpoint, protocolVersions: [1] });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "allow-findings-"));
    sockets = path.join(dir, "engines");
    mkdirSync(sockets);
    mkdirSync(path.join(dir, "private"));
    sentinel = createServer((s) => {
      sentinelConnections.push(Date.now());
      s.destroy();
    });
    await new Promise<void>((r) => sentinel.listen(path.join(dir, "private", "db.sock"), r));
    symlinkSync(path.join(dir, "private", "db.sock"), path.join(sockets, "innocent.sock"));
    contextd = await startContextd({
      config: {
        engines: { allow_endpoints: ["127.0.0.1", "localhost", "::1", `unix:${sockets}/`] },
        slots: { agents: { unixy: "unix-eng" } },
      },
    });
    registry = registryClient(contextd.address);
    tcpEngine = await startTsEngine({ engineId: "tcp-eng" });
  });
  afterAll(async () => {
    registry?.close();
    await tcpEngine?.stop();
    await contextd?.cleanup();
    sentinel?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("PostgreSQL's socket (unix:/var/run/postgresql/.s.PGSQL.5432) is refused ENDPOINT_NOT_ALLOWED without contextd connecting", async () => {
    const res = await registry.register(req("pg-eng", `unix:${POSTGRES_SOCKET}`));
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    expect(res.message).toContain("without dialling");
    expect(res.message).toContain("unix: directory");
    // The same for a socket of ours outside the allowed directory, and for a link to it inside:
    // the admission answers after its dial, so a connection would have been counted by now.
    for (const endpoint of [`unix:${dir}/private/db.sock`, `unix:${sockets}/innocent.sock`, `unix:${sockets}/../private/db.sock`]) {
      const r = await registry.register(req("pg-eng", endpoint));
      expect(r, endpoint).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    }
    expect(sentinelConnections).toEqual([]);
  });

  it("a unix engine in an allowed directory is admitted and serves", async () => {
    const endpoint = `unix:${sockets}/unix-eng.sock`;
    const engine = await startTsEngine({ engineId: "unix-eng", listen: endpoint });
    const cx = new ContextdClient({ address: contextd.address, timeoutMs: 20_000 });
    try {
      const res = await registry.register(req("unix-eng", endpoint));
      expect(res.ok, res.message).toBe(true);
      const session = { sessionId: "unixy-1", agentId: "unixy" };
      await cx.appendMessages({ session, messages: [user("hello over a unix socket")] });
      expect(await cx.assemble({ session, tokenBudget: 4000 })).toMatchObject({ engineId: "unix-eng", mode: Mode.MODE_NORMAL });
      expect(engine.events().some((e) => e.event === "call")).toBe(true);
      await registry.deregister("unix-eng");
    } finally {
      cx.close();
      await engine.stop();
    }
  });

  it("dns://8.8.8.8/localhost:1234 is refused: the caller does not choose contextd's DNS server", async () => {
    const res = await registry.register(req("dns-eng", "dns://8.8.8.8/localhost:1234"));
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    expect(res.message).toContain("dns://AUTHORITY/");
    // dns:/// (no authority) is host:port, resolved by contextd's own resolver.
    const ok = await registry.register(req("tcp-eng", `dns:///${tcpEngine.address}`));
    expect(ok.ok, ok.message).toBe(true);
    await registry.deregister("tcp-eng");
  });

  it("a port over 65535 is refused naming the port, before any dialling", async () => {
    const res = await registry.register(req("port-eng", "127.0.0.1:70000"));
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    expect(res.message).toContain("70000");
    expect(res.message).toContain("1..65535");
    expect(res.message).not.toContain("ERR_SOCKET_BAD_PORT");
  });

  it("an unreachable endpoint's refusal names no errno: a missing socket, a missing directory and a closed port read alike", async () => {
    const missing = await registry.register(req("gone-eng", `unix:${sockets}/missing.sock`));
    const noDir = await registry.register(req("gone-eng", `unix:${sockets}/no-such-dir/missing.sock`));
    const closed = await registry.register(req("gone-eng", "127.0.0.1:1"));
    for (const r of [missing, noDir, closed]) {
      expect(r).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_UNREACHABLE });
      expect(r.message).toContain("not reachable within the admission deadline (UNAVAILABLE)");
      expect(r.message).not.toMatch(ERRNO);
    }
    // Apart from the endpoint it repeats, a missing directory reads as a missing socket.
    const strip = (m: string) => m.replace(/^"[^"]*"/, "");
    expect(strip(noDir.message)).toBe(strip(missing.message));
  });

  it("localhost (resolved, its loopback address listed) is admitted", async () => {
    const endpoint = tcpEngine.address.replace("127.0.0.1", "localhost");
    const res = await registry.register(req("tcp-eng", endpoint));
    expect(res.ok, res.message).toBe(true);
    expect((await registry.get("tcp-eng")).endpoint).toBe(endpoint);
    await registry.deregister("tcp-eng");
  });
});
