import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage } from "../../src/contract/messages.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { ANSI, closedPort, contextctl, jsonLines, run } from "./run-contextctl.js";

/**
 * What every contextctl command shares: --help with an example, the exit codes scripts rely on
 * (0 ok, 1 failed, 2 usage, 3 unreachable), and colour only when asked for (stdout is a pipe here,
 * so never by default; FORCE_COLOR forces it; NO_COLOR and --no-color always win).
 */

/** The command names `contextctl --help` lists (plus the `engines watch` subcommand). */
async function commandNames(): Promise<string[]> {
  const help = (await run(["--help"])).stdout;
  const section = help.slice(help.indexOf("Commands:"), help.indexOf("\n\n", help.indexOf("Commands:")));
  const names = [...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]).filter((n) => n !== "help");
  return [...names, "engines watch"];
}

describe("contextctl conventions", () => {
  let dir: string;
  let file: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "contextctl-conv-"));
    file = join(dir, "chat.jsonl");
    writeFileSync(file, `${JSON.stringify({ role: "user", content: "hello" })}\n`);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("contextctl --help documents the exit codes and has examples", async () => {
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Exit codes:\n {2}0 .*\n {2}1 .*\n(?: {5}.*\n)? {2}2 .*usage.*\n {2}3 .*unreachable/m);
    expect(help.stdout).toMatch(/Examples:\n {2}\$ contextctl /);
  });

  it("every command's --help exits 0 with an example and the --json option", async () => {
    const names = await commandNames();
    expect(names).toEqual(
      expect.arrayContaining([
        "health",
        "sessions",
        "session",
        "context",
        "transcript",
        "compact",
        "replay",
        "import",
        "export",
        "doctor",
        "engines",
        "isolate",
        "release",
        "deregister",
        "migrate-store",
        "backup",
        "restore",
        "audit",
      ]),
    );
    for (const name of names) {
      const help = await run([...name.split(" "), "--help"]);
      expect(help.code, name).toBe(0);
      expect(help.stdout, name).toMatch(new RegExp(`Examples?:\\n {2}\\$ contextctl .*${name.split(" ")[0]}`));
      expect(help.stdout, name).toContain("--json");
    }
  });

  it("exit 2 for usage errors, before anything is sent", async () => {
    const address = `127.0.0.1:${await closedPort()}`; // had anything been sent, it would be exit 3
    const usage = [
      [],
      ["bogus"],
      ["sessions", "--bogus"],
      ["session"],
      ["context", "s1"],
      ["context", "s1", "--budget", "lots"],
      ["context", "s1", "--budget", "0"],
      ["transcript"],
      ["transcript", "s1", "--page-size", "99999"],
      ["compact", "s1", "--budget", "-5"],
      ["replay", file],
      ["--timeout", "soon", "health"],
      ["migrate-store", "sqlite:x.db"],
      ["deregister"],
      ["deregister", " "],
      ["backup", "x.db"],
      ["restore", "x.db"],
      ["audit", "--limit", "0"],
    ];
    for (const args of usage) {
      const r = await contextctl(address, ...args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout, args.join(" ")).toBe("");
    }
  });

  it("exit 3 when contextd cannot be reached, for every command that calls it", async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const calls = [
      ["health"],
      ["sessions"],
      ["session", "s1"],
      ["context", "s1", "--budget", "1000"],
      ["transcript", "s1"],
      ["compact", "s1"],
      ["replay", file, "--budget", "1000"],
      ["import", file],
      ["export", "s1"],
      ["engines"],
      ["engines", "watch"],
      ["isolate", "e1"],
      ["release", "e1"],
      ["deregister", "e1"],
      ["audit"],
    ];
    for (const args of calls) {
      for (const json of [[], ["--json"]]) {
        const r = await contextctl(address, "--timeout", "5000", ...json, ...args);
        expect(r.code, [...json, ...args].join(" ")).toBe(3);
        // The one-line error on stderr (health --json carries it in its answer: status UNREACHABLE).
        expect(args[0] === "health" && json.length ? JSON.parse(r.stdout).status : r.stderr, args.join(" ")).toMatch(
          /^contextctl: (UNAVAILABLE|DEADLINE_EXCEEDED)|^contextd .*: (UNAVAILABLE|DEADLINE_EXCEEDED)|^UNREACHABLE$/,
        );
      }
    }
    // Name resolution that fails is unreachable too.
    expect((await run(["--address", "no-such-host.invalid:50051", "--timeout", "5000", "sessions"])).code).toBe(3);
  });

  describe("against a real contextd", () => {
    let server: ContextdProcess;
    let cx: ContextdClient;

    beforeAll(async () => {
      server = await startContextd();
      cx = new ContextdClient({ address: server.address });
      await cx.appendMessages({ session: { sessionId: "c1" }, messages: [textMessage(Role.ROLE_USER, "hello"), textMessage(Role.ROLE_ASSISTANT, "hi")] });
    });
    afterAll(async () => {
      cx?.close();
      await server?.stop();
    });

    const coloured = [["health"], ["sessions"], ["session", "c1"], ["context", "c1", "--budget", "1000"], ["transcript", "c1"], ["engines"], ["compact", "c1"]];

    it("exit 0 on success and 1 when contextd answers with an error", async () => {
      for (const args of coloured) expect((await contextctl(server.address, ...args)).code, args.join(" ")).toBe(0);
      const exists = await contextctl(server.address, "import", file, "--session", "c1");
      expect(exists.code).toBe(1); // ALREADY_EXISTS
      expect(exists.stderr).toMatch(/^contextctl: ALREADY_EXISTS: /);
      expect((await contextctl(server.address, "session", "")).code).toBe(1); // INVALID_ARGUMENT from the server
      expect((await contextctl(server.address, "release", "no-such-engine")).code).toBe(1); // NOT_FOUND
    });

    it("colour codes only with FORCE_COLOR; never with NO_COLOR or --no-color; never in --json", async () => {
      for (const args of coloured) {
        const what = args.join(" ");
        const plain = await contextctl(server.address, ...args);
        expect(plain.stdout, what).not.toMatch(ANSI);
        const forced = await run(["--address", server.address, ...args], { FORCE_COLOR: "1" });
        expect(forced.code, what).toBe(0);
        expect(forced.stdout, what).toMatch(ANSI);
        // Colour changes nothing else (commands whose output cannot change between two runs).
        if (["health", "transcript", "session"].includes(args[0])) expect(forced.stdout.replace(new RegExp(ANSI.source, "g"), ""), what).toBe(plain.stdout);
        expect((await run(["--address", server.address, ...args], { FORCE_COLOR: "1", NO_COLOR: "1" })).stdout, what).not.toMatch(ANSI);
        expect((await run(["--address", server.address, "--no-color", ...args], { FORCE_COLOR: "1" })).stdout, what).not.toMatch(ANSI);
        expect((await run(["--address", server.address, ...args], { NO_COLOR: "1" })).stdout, what).not.toMatch(ANSI);
        const json = await run(["--address", server.address, "--json", ...args], { FORCE_COLOR: "1" });
        expect(json.stdout, what).not.toMatch(ANSI);
        expect(json.code, what).toBe(0);
        expect(args[0] === "transcript" ? jsonLines(json.stdout).length : Object.keys(JSON.parse(json.stdout)).length, what).toBeGreaterThan(0);
      }
      const error = await run(["--address", server.address, "session", "nobody"], { FORCE_COLOR: "1" });
      expect(error.stderr).toMatch(/^contextctl: NOT_FOUND: /);
      expect(error.stderr).not.toMatch(ANSI);
    });

    it("migrate-store --json copies the stopped server's store and says what it copied", async () => {
      expect(await server.stop()).toBe(0);
      const to = `sqlite:${join(dir, "copy.db")}`;
      const r = await run(["--json", "migrate-store", `sqlite:${join(server.dataDir, "contextd.db")}`, to]);
      expect(r).toMatchObject({ code: 0, stderr: "" });
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, to, sessions: 1, entries: 2, seconds: expect.any(Number) });
    });
  });
});
