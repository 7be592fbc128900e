/**
 * Debian's HAProxy running the repository's documented config, docs/deploy/haproxy.cfg, unchanged:
 * the listen address and the replicas' addresses are passed in the environment the file reads
 * (CONTEXTD_LB_LISTEN, CONTEXTD_REPLICA_1..3).
 *
 *   const lb = await startHaproxy(replicas.map((r) => r.address));
 *   const cx = new ContextdClient({ address: lb.address });
 *   await lb.waitForServer("r1", "UP", afterIndex);
 *   await lb.stop();
 *
 * HAProxy missing is an error (the test fails): .ci/run installs the `haproxy` package.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./contextd-process.js";
import { getFreePort } from "./free-port.js";

export const HAPROXY_CONFIG = path.join(REPO_ROOT, "docs", "deploy", "haproxy.cfg");

/** The haproxy executable, or an Error saying how to install it. */
export function haproxyBinary(): string {
  for (const candidate of ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy", "/usr/bin/haproxy"]) {
    if (fs.existsSync(candidate)) return candidate;
  }
  const which = spawnSync("sh", ["-c", "command -v haproxy"], { encoding: "utf8" });
  if (which.status === 0 && which.stdout.trim()) return which.stdout.trim();
  throw new Error("haproxy is not installed: these tests run the real load balancer (apt-get install haproxy; .ci/run installs it)");
}

export interface ServerEvent {
  server: string;
  state: "UP" | "DOWN";
  /** Index in the event list (to wait for an event after a known point). */
  index: number;
  atMs: number;
}

export interface Haproxy {
  /** host:port runtimes dial. */
  address: string;
  /** stdout + stderr so far. */
  logs(): string;
  /** Server state changes HAProxy reported, in order. */
  events(): ServerEvent[];
  /** Resolves with the first event for `server` in `state` whose index is ≥ `fromIndex`. */
  waitForServer(server: string, state: "UP" | "DOWN", fromIndex?: number, timeoutMs?: number): Promise<ServerEvent>;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const c of live) c.kill("SIGKILL");
});

/** Starts HAProxy in front of `replicas` (one to three addresses; missing ones repeat the last). */
export async function startHaproxy(replicas: string[]): Promise<Haproxy> {
  const bin = haproxyBinary();
  if (replicas.length < 1 || replicas.length > 3) throw new Error("docs/deploy/haproxy.cfg has three server lines: give one to three replicas");
  const port = await getFreePort();
  const address = `127.0.0.1:${port}`;
  const servers = [0, 1, 2].map((i) => replicas[Math.min(i, replicas.length - 1)]!);
  const env = {
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
    CONTEXTD_LB_LISTEN: address,
    CONTEXTD_REPLICA_1: servers[0]!,
    CONTEXTD_REPLICA_2: servers[1]!,
    CONTEXTD_REPLICA_3: servers[2]!,
  };
  const check = spawnSync(bin, ["-c", "-f", HAPROXY_CONFIG], { env, encoding: "utf8" });
  if (check.status !== 0) throw new Error(`haproxy -c refused ${HAPROXY_CONFIG}:\n${check.stdout}${check.stderr}`);

  // -db: foreground, no daemon (what the config's comment asks for).
  const child = spawn(bin, ["-db", "-f", HAPROXY_CONFIG], { env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  let rest = "";
  const events: ServerEvent[] = [];
  const waiters: Array<() => void> = [];
  const onData = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    output += text;
    rest += text;
    let nl: number;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      // "[WARNING]  (123) : Server contextd_replicas/r1 is DOWN, reason: ..." (also printed as a log line: take one).
      const m = /^\[(?:WARNING|NOTICE|ALERT)\][^:]*: Server [\w-]+\/(\w+) is (UP|DOWN)\b/.exec(line);
      if (m) {
        events.push({ server: m[1]!, state: m[2] as "UP" | "DOWN", index: events.length, atMs: Date.now() });
        for (const w of waiters.splice(0)) w();
      }
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      live.delete(child);
      for (const w of waiters.splice(0)) w();
      resolve();
    }),
  );

  // Ready when the frontend accepts connections (HAProxy prints nothing on a good start).
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`haproxy exited at start:\n${output}`);
    const net = await import("node:net");
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`haproxy did not listen on ${address} within 15 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const waitForServer = (server: string, state: "UP" | "DOWN", fromIndex = 0, timeoutMs = 60_000): Promise<ServerEvent> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`haproxy did not report ${server} ${state} within ${timeoutMs} ms; output:\n${output}`)), timeoutMs);
      const look = () => {
        const e = events.find((x) => x.index >= fromIndex && x.server === server && x.state === state);
        if (e) {
          clearTimeout(timer);
          resolve(e);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          clearTimeout(timer);
          reject(new Error(`haproxy exited; output:\n${output}`));
        } else waiters.push(look);
      };
      look();
    });

  return {
    address,
    logs: () => output,
    events: () => [...events],
    waitForServer,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}
