/**
 * Starts the compiled lossless engine (`node dist/engines/lossless/main.js`) as a real child
 * process, the way an operator would: configuration through CONTEXTD_* and LOSSLESS_* variables.
 * Readiness is its pino line `lossless engine ready` (stderr), which carries the bound address.
 * Children still alive when the test process exits are SIGKILLed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "../helpers/contextd-process.js";

export const LOSSLESS_MAIN = path.join(REPO_ROOT, "dist/engines/lossless/main.js");

export interface LosslessProcess {
  address: string;
  pid: number;
  logs(): string;
  /** SIGTERM (deregister, drain, exit 0); resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL; resolves once it is gone. */
  kill9(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export async function startLossless(env: Record<string, string>, timeoutMs = 20_000): Promise<LosslessProcess> {
  if (!fs.existsSync(LOSSLESS_MAIN)) throw new Error(`${LOSSLESS_MAIN} is missing: run \`npm run build\` first`);
  const childEnv: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONTEXTD_") && !k.startsWith("LOSSLESS_")) childEnv[k] = v;
  Object.assign(childEnv, env);
  const child = spawn(process.execPath, [LOSSLESS_MAIN], { cwd: REPO_ROOT, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => {
      live.delete(child);
      resolve(code);
    });
  });
  const ready = new Promise<string>((resolve, reject) => {
    let rest = "";
    const timer = setTimeout(() => reject(new Error(`lossless engine not ready after ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const onData = (chunk: string) => {
      output += chunk;
      rest += chunk;
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        try {
          const obj = JSON.parse(line) as { msg?: string; address?: string };
          if (obj.msg === "lossless engine ready" && obj.address) {
            clearTimeout(timer);
            resolve(obj.address);
          }
        } catch {
          // not JSON
        }
      }
    };
    child.stderr!.setEncoding("utf8").on("data", onData);
    child.stdout!.setEncoding("utf8").on("data", (c: string) => (output += c));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`lossless engine exited (code ${String(code)}) before it was ready:\n${output}`));
    });
  });
  const address = await ready;
  return {
    address,
    pid: child.pid!,
    logs: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    kill9: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
