/**
 * `pip install ./clients/python` works offline and gives a usable package: a venv of Debian's
 * python3 with --system-site-packages (grpcio and protobuf come from python3-grpcio), pip with no
 * index and every proxy pointing at a closed port, then — from a directory outside the repository,
 * with no PYTHONPATH — the installed `contextd` (not the tree's) makes a real call to contextd.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { lastJsonLine, PYTHON, PYTHON_PACKAGE_DIR, pythonEnv, REPO_ROOT, requirePythonGrpc, runPython } from "../helpers/python.js";

const run = promisify(execFile);
const TOKEN = "py-install-runtime-token-0123456789";

const PROBE = `
import asyncio, importlib.metadata as md, json, os, sys
import contextd
from contextd import messages as m
with contextd.Client(sys.argv[1], token=os.environ["CONTEXTD_RUNTIME_TOKEN"], timeout=30) as cx:
    appended = cx.append_messages(session=("installed", "pip"), messages=[m.user("hello from a venv")])
    ctx = cx.assemble(session=("installed", "pip"), token_budget=1000)
async def on_asyncio():
    async with contextd.AsyncClient(sys.argv[1], token=os.environ["CONTEXTD_RUNTIME_TOKEN"], timeout=30) as cx:
        return (await cx.get_session(session=("installed", "pip"))).info.message_count
print(json.dumps({
    "async_message_count": asyncio.run(on_asyncio()),
    "file": os.path.realpath(contextd.__file__),
    "version": md.version("contextd"),
    "requires": md.requires("contextd"),
    "appended": len(appended.entry_ids),
    "mode": contextd.Mode.Name(ctx.mode),
    "text": m.text_of(ctx.messages[-1]),
}))
`;

describe("pip install ./clients/python (offline, into a venv)", () => {
  let tmp: string;
  let cd: ContextdProcess;

  beforeAll(async () => {
    requirePythonGrpc();
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "contextd-pyinstall-")));
    cd = await startContextd({ config: { auth: { required: true, runtimes: [{ token_env: "PY_INSTALL_TOKEN" }] } }, env: { PY_INSTALL_TOKEN: TOKEN } });
  });
  afterAll(async () => {
    await cd?.cleanup();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("installs with no index and the installed package calls contextd from outside the repository", async () => {
    const venv = path.join(tmp, "venv");
    // No PYTHONPATH anywhere below: the tree's package must not be what gets imported.
    const env = pythonEnv({}, false);
    await run(PYTHON, ["-m", "venv", "--system-site-packages", venv], { cwd: tmp, env, timeout: 120_000 });

    const offline = {
      ...env,
      PIP_NO_INDEX: "1",
      PIP_DISABLE_PIP_VERSION_CHECK: "1",
      PIP_CACHE_DIR: path.join(tmp, "pip-cache"),
      // Anything that still tried the network would hit a closed port and fail the install.
      HTTP_PROXY: "http://127.0.0.1:9",
      HTTPS_PROXY: "http://127.0.0.1:9",
      http_proxy: "http://127.0.0.1:9",
      https_proxy: "http://127.0.0.1:9",
    };
    let installLog: string;
    try {
      const pip = await run(path.join(venv, "bin", "pip"), ["install", PYTHON_PACKAGE_DIR], { cwd: tmp, env: offline, timeout: 180_000 });
      installLog = pip.stdout + pip.stderr;
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(`pip install failed:\n${e.stdout ?? ""}${e.stderr ?? e.message}`);
    }
    expect(installLog).toMatch(/Successfully installed contextd-0\.1\.0/);
    // The in-tree backend builds into pip's temp dir: nothing is left in the source tree.
    for (const leftover of ["build", "dist", "contextd.egg-info"]) {
      expect(fs.existsSync(path.join(PYTHON_PACKAGE_DIR, leftover)), leftover).toBe(false);
    }

    const probe = await runPython(
      ["-c", PROBE],
      [cd.address],
      { CONTEXTD_RUNTIME_TOKEN: TOKEN },
      {
        python: path.join(venv, "bin", "python"),
        cwd: tmp,
        withPackage: false,
      },
    );
    expect(probe.code, probe.stderr + probe.stdout).toBe(0);
    const r = lastJsonLine(probe.stdout)!;
    expect(r.file as string).toMatch(new RegExp(`^${venv.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/lib/python3[.0-9]*/site-packages/contextd/__init__\\.py$`));
    expect((r.file as string).startsWith(REPO_ROOT)).toBe(false);
    expect(r).toMatchObject({
      version: "0.1.0",
      requires: ["grpcio>=1.51", "protobuf>=4.21"],
      appended: 1,
      mode: "MODE_NORMAL",
      text: "hello from a venv",
      async_message_count: 1,
    });
  });
});
