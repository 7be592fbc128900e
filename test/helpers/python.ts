/**
 * Python interop for tests: run scripts with Debian's Python (python3-grpcio, python3-protobuf)
 * and the repository's `contextd` package (clients/python, with its committed generated stubs).
 *
 * Deliberately `/usr/bin/python3`, not `python3` from PATH: on the CI image PATH finds a pyenv
 * interpreter without grpc.
 *
 *   beforeAll(() => requirePythonGrpc());             // throws (the test fails) when grpc is missing
 *   const r = await runPython("test/python/client_smoke.py", [cd.address, "s1"], { CONTEXTD_RUNTIME_TOKEN: "t" });
 *   expect(r.code, r.stderr).toBe(0);
 *   const result = lastJsonLine(r.stdout);
 */
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(HERE, "../..");
export const PYTHON = "/usr/bin/python3";
/** The root of the `contextd` Python package (what goes on PYTHONPATH; what `pip install` takes). */
export const PYTHON_PACKAGE_DIR = path.join(REPO_ROOT, "clients", "python");

let grpcCheck: { ok: boolean; why: string } | undefined;

function checkPythonGrpc(): { ok: boolean; why: string } {
  if (grpcCheck) return grpcCheck;
  const r = spawnSync(PYTHON, ["-c", "import grpc, google.protobuf"], { encoding: "utf8", timeout: 30_000, env: pythonEnv() });
  const why = r.error ? r.error.message : (r.stderr || `exit code ${String(r.status)}`).trim();
  grpcCheck = { ok: r.status === 0, why };
  return grpcCheck;
}

/** True when Debian's python3 can import grpc and protobuf. */
export function pythonGrpcAvailable(): boolean {
  return checkPythonGrpc().ok;
}

/**
 * Throws when `/usr/bin/python3` cannot import grpc and protobuf, saying what to install. Tests that
 * need Python call it (in `beforeAll`), so a machine without it FAILS them instead of skipping.
 */
export function requirePythonGrpc(): void {
  const { ok, why } = checkPythonGrpc();
  if (!ok) {
    throw new Error(
      `${PYTHON} cannot import grpc and google.protobuf (${why}). ` +
        "Install Debian's packages: apt-get install -y python3 python3-grpcio python3-protobuf python3-venv",
    );
  }
}

/**
 * The environment for a Python child: `process.env` + `extra`, with PYTHONPATH = clients/python
 * (then `extra.PYTHONPATH`, if given), unbuffered output, no bytecode written into the tree, and no
 * PYTHONHOME (a pyenv setting must not redirect the absolute interpreter to another stdlib).
 * `withPackage = false` leaves clients/python off the path (an inherited PYTHONPATH is dropped too),
 * for tests of an installed package.
 */
export function pythonEnv(extra: Record<string, string> = {}, withPackage = true): NodeJS.ProcessEnv {
  const pythonPath = [withPackage ? PYTHON_PACKAGE_DIR : "", extra.PYTHONPATH ?? ""].filter(Boolean).join(path.delimiter);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...extra,
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
  };
  if (pythonPath) env.PYTHONPATH = pythonPath;
  else delete env.PYTHONPATH;
  delete env.PYTHONHOME;
  return env;
}

export interface PythonResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunPythonOptions {
  /** Kill the script after this long (default 120 s); `code` is then null. */
  timeoutMs?: number;
  /** Default: the repository root. */
  cwd?: string;
  /** The interpreter (default {@link PYTHON}; e.g. a venv's bin/python). */
  python?: string;
  /** Put clients/python on PYTHONPATH (default true; false to test an installed package). */
  withPackage?: boolean;
}

/**
 * Runs `script` (a path, relative to the repo root or absolute; or `["-c", code]`, `["-m", module]`) with `args`,
 * in {@link pythonEnv}(`env`). Resolves when the script exits, however it exits.
 */
export function runPython(
  script: string | ["-c" | "-m", string],
  args: string[] = [],
  env: Record<string, string> = {},
  options: RunPythonOptions = {},
): Promise<PythonResult> {
  const head = Array.isArray(script) ? script : [path.isAbsolute(script) ? script : path.join(REPO_ROOT, script)];
  const timeoutMs = options.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const child = spawn(options.python ?? PYTHON, [...head, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: pythonEnv(env, options.withPackage ?? true),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      stderr += `\n[runPython] killed after ${timeoutMs} ms`;
      child.kill("SIGKILL");
    }, timeoutMs);
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

/** The last line of `stdout` that parses as a JSON object (what the test scripts print). */
export function lastJsonLine(stdout: string): Record<string, unknown> | undefined {
  const lines = stdout
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
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
