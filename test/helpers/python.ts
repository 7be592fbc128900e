/**
 * Python interop for tests: generate contextd.v1 Python stubs with Debian's protoc and grpc plugin,
 * and run scripts with Debian's Python (which has grpcio and protobuf installed).
 *
 * Deliberately `/usr/bin/python3`, not `python3` from PATH: on the CI image PATH finds a pyenv
 * interpreter without grpc.
 *
 *   const stubs = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-py-"));
 *   generatePythonStubs(stubs);
 *   const r = await runPython("test/python/client_smoke.py", [cd.address, "s1"], {}, { stubsDir: stubs });
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(HERE, "../..");
export const PROTO_DIR = path.join(REPO_ROOT, "proto");
export const PYTHON = "/usr/bin/python3";
export const PROTOC = "/usr/bin/protoc";
export const GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin";

let lastStubsDir: string | undefined;

/**
 * Writes `contextd/v1/*_pb2.py` and `*_pb2_grpc.py` into `outDir` (created if needed), with empty
 * `__init__.py` files so that `from contextd.v1 import session_pb2` works with `outDir` on
 * PYTHONPATH. Throws with protoc's stderr when generation fails.
 */
export function generatePythonStubs(outDir: string): void {
  const protoPkg = path.join(PROTO_DIR, "contextd", "v1");
  const protos = fs
    .readdirSync(protoPkg)
    .filter((f) => f.endsWith(".proto"))
    .sort()
    .map((f) => `contextd/v1/${f}`);
  if (protos.length === 0) throw new Error(`no .proto files in ${protoPkg}`);
  fs.mkdirSync(path.join(outDir, "contextd", "v1"), { recursive: true });
  try {
    execFileSync(
      PROTOC,
      [
        `-I${PROTO_DIR}`,
        `--python_out=${outDir}`,
        `--grpc_python_out=${outDir}`,
        `--plugin=protoc-gen-grpc_python=${GRPC_PYTHON_PLUGIN}`,
        ...protos,
      ],
      { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`protoc failed: ${e.stderr || e.message}`);
  }
  for (const dir of [path.join(outDir, "contextd"), path.join(outDir, "contextd", "v1")]) {
    const init = path.join(dir, "__init__.py");
    if (!fs.existsSync(init)) fs.writeFileSync(init, "");
  }
  lastStubsDir = outDir;
}

/** True when Debian's python3 can import grpc and protobuf and protoc + the grpc plugin exist. */
export function pythonGrpcAvailable(): boolean {
  if (![PYTHON, PROTOC, GRPC_PYTHON_PLUGIN].every((f) => fs.existsSync(f))) return false;
  const r = spawnSync(PYTHON, ["-c", "import grpc, google.protobuf"], { stdio: "ignore", timeout: 20_000 });
  return r.status === 0;
}

export interface PythonResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunPythonOptions {
  /** Directory with the generated stubs, put on PYTHONPATH. Default: the last `generatePythonStubs` dir. */
  stubsDir?: string;
  /** Kill the script after this long (default 120 s); `code` is then null. */
  timeoutMs?: number;
  cwd?: string;
}

/**
 * Runs `script` (a path, relative to the repo root or absolute) with `/usr/bin/python3`. The
 * environment is `process.env` + `env`, with PYTHONPATH = the stubs dir (followed by `env.PYTHONPATH`
 * if given) and unbuffered output.
 */
export function runPython(
  script: string,
  args: string[] = [],
  env: Record<string, string> = {},
  options: RunPythonOptions = {},
): Promise<PythonResult> {
  const stubsDir = options.stubsDir ?? lastStubsDir;
  const scriptPath = path.isAbsolute(script) ? script : path.join(REPO_ROOT, script);
  const pythonPath = [stubsDir, env.PYTHONPATH].filter(Boolean).join(path.delimiter);
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...env,
    PYTHONPATH: pythonPath,
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
  };
  // A pyenv shim on PATH must not matter: we run an absolute interpreter, and its own site-packages.
  delete childEnv.PYTHONHOME;
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [scriptPath, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      stderr += `\n[runPython] killed after ${options.timeoutMs ?? 120_000} ms`;
      child.kill("SIGKILL");
    }, options.timeoutMs ?? 120_000);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The last line of `stdout` that parses as a JSON object (what client_smoke.py prints). */
export function lastJsonLine(stdout: string): Record<string, unknown> | undefined {
  const lines = stdout.split("\n").map((l) => l.trim()).filter(Boolean);
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const v = JSON.parse(lines[i]!) as unknown;
      if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // not JSON
    }
  }
  return undefined;
}
