/**
 * The proto is the contract: a Go client made from proto/contextd/v1/*.proto alone works. protoc
 * with Debian's protoc-gen-go and protoc-gen-go-grpc generates the stubs into a temporary GOPATH —
 * where they land is the files' own `go_package`, no `M` mapping given — and the checked-in
 * test/go-client/chat (the README's "Use it from a runtime" chat turn, in Go) is built against
 * them and Debian's grpc-go in GOPATH mode, with no network (GOPROXY=off). It then runs against a
 * real contextd that requires a runtime token, as the README's Python and TypeScript examples do.
 *
 * Needs Debian's golang-go, protoc-gen-go, protoc-gen-go-grpc and golang-google-grpc-dev
 * (scripts/test-prerequisites.sh installs them); without them it fails saying what to install.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "contextd/client";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const run = promisify(execFile);

const PROTO_DIR = path.join(REPO_ROOT, "proto");
const CHAT_DIR = path.join(REPO_ROOT, "test/go-client/chat");
/** Where Debian's golang-*-dev packages put Go sources: a GOPATH entry. */
const DEBIAN_GOPATH = "/usr/share/gocode";
/** The import path every file's go_package names. */
const GO_PACKAGE = "github.com/contextd/contextd/gen/go/contextd/v1";
const TOKEN = "go-client-runtime-token-0123456789";

/** What the test needs from the machine, each with the Debian package that provides it. */
const TOOLS: Array<{ what: string; found: () => boolean; pkg: string }> = [
  { what: "protoc", found: () => onPath("protoc"), pkg: "protobuf-compiler" },
  { what: "protoc-gen-go", found: () => onPath("protoc-gen-go"), pkg: "protoc-gen-go" },
  { what: "protoc-gen-go-grpc", found: () => onPath("protoc-gen-go-grpc"), pkg: "protoc-gen-go-grpc" },
  { what: "go", found: () => onPath("go"), pkg: "golang-go" },
  { what: "grpc-go sources", found: () => fs.existsSync(path.join(DEBIAN_GOPATH, "src/google.golang.org/grpc")), pkg: "golang-google-grpc-dev" },
  {
    what: "protobuf-go sources",
    found: () => fs.existsSync(path.join(DEBIAN_GOPATH, "src/google.golang.org/protobuf")),
    pkg: "golang-google-protobuf-dev",
  },
  {
    // grpc-go marshals through github.com/golang/protobuf. Debian's 1.3 of it (what apt picks for
    // golang-google-grpc-dev unless told otherwise) cannot marshal messages of protoc-gen-go 1.20+
    // (the client panics in its table marshaler); 1.5 is a layer over google.golang.org/protobuf.
    what: "github.com/golang/protobuf 1.5",
    found: () =>
      fs.existsSync(path.join(DEBIAN_GOPATH, "src/github.com/golang/protobuf/proto")) &&
      !fs.existsSync(path.join(DEBIAN_GOPATH, "src/github.com/golang/protobuf/proto/table_marshal.go")),
    pkg: "golang-github-golang-protobuf-1-5-dev",
  },
];

function onPath(command: string): boolean {
  return (process.env.PATH ?? "").split(path.delimiter).some((dir) => dir && fs.existsSync(path.join(dir, command)));
}

/** Fails (never skips) when a tool is missing, naming the packages to install. */
function requireGoToolchain(): void {
  const missing = TOOLS.filter((t) => !t.found());
  if (missing.length > 0) {
    throw new Error(
      `missing ${missing.map((t) => t.what).join(", ")}: run 'apt-get install -y ${missing.map((t) => t.pkg).join(" ")}' ` +
        "(scripts/test-prerequisites.sh does)",
    );
  }
}

/** Runs a command, failing with its output. */
async function sh(file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<string> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd: opts.cwd, env: opts.env, timeout: opts.timeoutMs, maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${file} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
}

describe("a Go client generated from proto/contextd/v1 alone", () => {
  let tmp: string;
  let gopath: string;
  let goEnv: NodeJS.ProcessEnv;
  let cd: ContextdProcess;

  beforeAll(async () => {
    requireGoToolchain();
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "contextd-go-client-")));
    gopath = path.join(tmp, "gopath");
    fs.mkdirSync(path.join(gopath, "src"), { recursive: true });
    goEnv = {
      ...process.env,
      // GOPATH mode: Debian ships Go libraries as sources under /usr/share/gocode, not as modules,
      // and no module proxy is reachable; nothing may be fetched.
      GO111MODULE: "off",
      GOPATH: `${gopath}${path.delimiter}${DEBIAN_GOPATH}`,
      GOFLAGS: "",
      GOPROXY: "off",
      // Go needs a build cache; the user's own when there is a home, else one in the temp dir.
      ...(process.env.GOCACHE || process.env.HOME || process.env.XDG_CACHE_HOME ? {} : { GOCACHE: path.join(tmp, "gocache") }),
    };
    cd = await startContextd({ config: { auth: { required: true, runtimes: [{ token_env: "GO_CLIENT_TOKEN" }] } }, env: { GO_CLIENT_TOKEN: TOKEN } });
  });

  afterAll(async () => {
    await cd?.cleanup();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("protoc-gen-go and protoc-gen-go-grpc generate every file's stubs into the package its own go_package names", async () => {
    const protos = fs
      .readdirSync(path.join(PROTO_DIR, "contextd/v1"))
      .filter((f) => f.endsWith(".proto"))
      .map((f) => `contextd/v1/${f}`);
    await sh("protoc", ["-I", PROTO_DIR, `--go_out=${path.join(gopath, "src")}`, `--go-grpc_out=${path.join(gopath, "src")}`, ...protos], {
      timeoutMs: 60_000,
    });
    const out = path.join(gopath, "src", GO_PACKAGE);
    const generated = fs.readdirSync(out).sort();
    for (const proto of protos) {
      const base = path.basename(proto, ".proto");
      expect(generated).toContain(`${base}.pb.go`);
    }
    // One _grpc.pb.go per file that defines a service.
    expect(generated.filter((f) => f.endsWith("_grpc.pb.go")).sort()).toEqual([
      "audit_grpc.pb.go",
      "engine_grpc.pb.go",
      "host_grpc.pb.go",
      "registry_grpc.pb.go",
      "session_grpc.pb.go",
    ]);
    expect(fs.readFileSync(path.join(out, "session.pb.go"), "utf8")).toMatch(/^package contextdv1$/m);
  });

  it("the README's chat turn builds in Go against the stubs and Debian's grpc-go, offline", async () => {
    // From its own directory: GOPATH mode builds "." outside GOPATH, not an absolute path.
    await sh("go", ["build", "-o", path.join(tmp, "chat"), "."], { cwd: CHAT_DIR, env: goEnv, timeoutMs: 300_000 });
    expect(fs.existsSync(path.join(tmp, "chat"))).toBe(true);
  });

  it("the Go chat turn prints the serving engine, mode, token estimate and message count; run again, its idempotent append writes nothing", async () => {
    const chat = () =>
      sh(path.join(tmp, "chat"), ["-address", cd.address], { cwd: tmp, env: { ...process.env, CONTEXTD_RUNTIME_TOKEN: TOKEN }, timeoutMs: 60_000 });
    const first = (await chat()).trim();
    expect(first).toMatch(/^legacy MODE_NORMAL \d+ 1$/);
    const again = (await chat()).trim();
    expect(again).toBe(first);

    const cx = new ContextdClient({ address: cd.address, token: TOKEN });
    try {
      const { info } = await cx.getSession({ session: { sessionId: "chat-go" } });
      expect(info?.messageCount).toBe(1);
      expect(info?.session?.agentId).toBe("coder");
    } finally {
      cx.close();
    }
  });
});
