/**
 * Starts the compiled lossless engine (`node dist/engines/lossless/main.js`) as a real child
 * process, the way an operator would: configuration through CONTEXTD_* and LOSSLESS_* variables.
 * Readiness is its pino line `lossless engine ready` (stderr), which carries the bound address.
 * Children still alive when the test process exits are SIGKILLed (bench/harness/child-process.ts).
 */
import fs from "node:fs";
import path from "node:path";
import { childEnv, spawnChild } from "../../bench/harness/child-process.js";
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

export async function startLossless(env: Record<string, string>, timeoutMs = 20_000): Promise<LosslessProcess> {
  if (!fs.existsSync(LOSSLESS_MAIN)) throw new Error(`${LOSSLESS_MAIN} is missing: run \`npm run build\` first`);
  const child = spawnChild({
    name: "lossless engine",
    cmd: process.execPath,
    args: [LOSSLESS_MAIN],
    cwd: REPO_ROOT,
    env: childEnv(["CONTEXTD_", "LOSSLESS_"], env),
    parse: "stderr",
  });
  const ready = await child
    .waitForLine((l) => l.msg === "lossless engine ready" && typeof l.address === "string" && l.address !== "", timeoutMs)
    .catch(async (err: unknown) => {
      await child.kill9();
      throw err;
    });
  return {
    address: ready.address as string,
    pid: child.pid,
    logs: child.output,
    stop: () => child.stop("SIGTERM", 10_000),
    kill9: child.kill9,
  };
}
