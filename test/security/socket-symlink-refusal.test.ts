/**
 * Issue 26 item 7: a symbolic link in an allowed `unix:` socket directory told whether its target
 * file exists — a link to an existing file outside the directory was refused "leads out of the
 * unix: directories", a link to a missing file answered UNREACHABLE (UNAVAILABLE). An owner could
 * probe contextd's file system with registrations. Now any symbolic link below an allowed
 * directory gets one fixed refusal, whatever it points at, and nothing is dialled.
 * (test/security/allow-list-findings.test.ts: the other allow-list findings, through contextd.)
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { registryClient } from "../helpers/registry-client.js";

describe("finding: a symbolic link in an allowed unix: directory told whether its target exists", () => {
  let dir: string;
  let sockets: string;
  let contextd: ContextdProcess;
  let registry: ReturnType<typeof registryClient>;
  /** Listening sockets (one outside the allowed directory, one inside): count who connects. */
  const sentinels: Server[] = [];
  const connections: string[] = [];

  const listen = async (socket: string) => {
    const server = createServer((s) => {
      connections.push(socket);
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(socket, r));
    sentinels.push(server);
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "socket-links-"));
    sockets = path.join(dir, "engines");
    mkdirSync(sockets);
    mkdirSync(path.join(dir, "private"));
    mkdirSync(path.join(sockets, "real-sub"));
    await listen(path.join(dir, "private", "db.sock"));
    await listen(path.join(sockets, "real.sock"));
    // Links to files: existing or missing, outside the directory or inside it.
    symlinkSync(path.join(dir, "private", "db.sock"), path.join(sockets, "out-existing.sock"));
    symlinkSync(path.join(dir, "private", "missing.sock"), path.join(sockets, "out-missing.sock"));
    symlinkSync(path.join(sockets, "real.sock"), path.join(sockets, "in-existing.sock"));
    symlinkSync(path.join(sockets, "missing.sock"), path.join(sockets, "in-missing.sock"));
    // Links to directories: existing or missing, outside or inside.
    symlinkSync(path.join(dir, "private"), path.join(sockets, "out-dir"));
    symlinkSync(path.join(dir, "no-such-dir"), path.join(sockets, "out-missing-dir"));
    symlinkSync(path.join(sockets, "real-sub"), path.join(sockets, "in-dir"));
    contextd = await startContextd({ config: { engines: { allow_endpoints: ["127.0.0.1", `unix:${sockets}/`] } } });
    registry = registryClient(contextd.address);
  });
  afterAll(async () => {
    registry?.close();
    await contextd?.cleanup();
    for (const s of sentinels) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("any symbolic link below an allowed unix: directory gets the same refusal and message whatever its target (existing, missing, inside, outside), without dialling", async () => {
    const endpoints = [
      "out-existing.sock",
      "out-missing.sock",
      "in-existing.sock",
      "in-missing.sock",
      "out-dir/db.sock",
      "out-dir/missing.sock",
      "out-missing-dir/x.sock",
      "in-dir/x.sock",
    ].map((p) => `unix:${sockets}/${p}`);
    const answers = [];
    for (const endpoint of endpoints) {
      const res = await registry.register({ engineId: "link-eng", owner: "acme", endpoint, protocolVersions: [1] });
      // The answer with the endpoint's own (quoted) text taken out: what is left must not vary.
      answers.push({ ok: res.ok, refusal: res.refusal, message: res.message.split(JSON.stringify(endpoint)).join("<endpoint>") });
    }
    expect(answers[0]).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    expect(answers[0].message).toContain("<endpoint>");
    expect(answers[0].message).toContain("symbolic link");
    expect(answers[0].message).not.toMatch(/UNAVAILABLE|ENOENT|not reachable|leads/);
    for (const [i, a] of answers.entries()) expect(a, endpoints[i]).toEqual(answers[0]);
    expect(connections).toEqual([]);
  });

  it("the real socket behind a link is still admitted to the check (only the link is refused)", async () => {
    // No engine serves there, so admission dials it and the probe fails: UNREACHABLE, not NOT_ALLOWED.
    const res = await registry.register({ engineId: "link-eng", owner: "acme", endpoint: `unix:${sockets}/real.sock`, protocolVersions: [1] });
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_UNREACHABLE });
  });
});
