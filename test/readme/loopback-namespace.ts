/**
 * A network namespace with nothing but its own loopback: commands in it can listen on the README's
 * fixed ports (50051, 9464) without colliding with anything else on the machine, and reach nothing
 * outside it. Needs root and iproute2 (CI installs it); without them the test fails, it never skips.
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { randomBytes } from "node:crypto";

export interface LoopbackNamespace {
  name: string;
  /** `bash -c script` inside the namespace, in its own process group (kill with -pid). */
  bash(script: string, options: SpawnOptions): ChildProcess;
  destroy(): void;
}

export function createLoopbackNamespace(): LoopbackNamespace {
  const name = `cxdr-${process.pid}-${randomBytes(3).toString("hex")}`;
  try {
    execFileSync("ip", ["netns", "add", name], { stdio: "pipe" });
    execFileSync("ip", ["-n", name, "link", "set", "lo", "up"], { stdio: "pipe" });
  } catch (err) {
    throw new Error(`cannot create network namespace ${name} (needs root and iproute2): ${(err as { stderr?: Buffer }).stderr?.toString() ?? err}`);
  }
  const destroy = () => {
    try {
      execFileSync("ip", ["netns", "del", name], { stdio: "ignore" });
    } catch {
      // already gone
    }
  };
  process.once("exit", destroy);
  return {
    name,
    bash: (script, options) => spawn("ip", ["netns", "exec", name, "bash", "-c", script], { ...options, detached: true }),
    destroy,
  };
}
