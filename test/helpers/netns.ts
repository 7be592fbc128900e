/**
 * A second "machine" for partition tests: a network namespace joined to this one by a veth pair,
 * with a random /30 out of 10.213.0.0/16 (everything stays inside this machine: the namespace has
 * no other interface and no default route). Processes started in it (`spawn`, or
 * `startNamespacedEngine`) reach the host only through the veth, so `cut()` partitions them.
 *
 *   const why = namespaceUnsupported();            // a reason, or undefined (root + ip + nft work)
 *   const host = await createTestHost();           // { nsIp, hostIp, ... }
 *   const engine = await startNamespacedEngine(host, { engineId: "p", registry: `${host.hostIp}:${port}`, owner: "team" });
 *   await host.cut();                              // silent drop, both directions
 *   await host.restore();
 *   await host.destroy();                          // also done when the test process exits
 *
 * Why nftables and not `ip link set down`: a link that goes down takes its connected route with
 * it, so packets for the namespace would follow the default route out of the machine or fail at
 * once with "network unreachable" — a fast error, like a death. A partition is silence: a netdev
 * ingress chain on each end of the veth (bound to that device alone) drops every frame on arrival
 * without a word to either side, and TCP connections stay "established" until their keepalives or
 * timeouts say otherwise. (netem would do too, but this kernel has no sch_netem.)
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { compileTsEngine, type EngineControl, type EngineEvent, type EngineProcess, type RegistrationOutcome } from "./engine-process.js";

const PREFIX = "cxdt";
const CUT_TABLE = "partition";

export interface TestHost {
  /** The network namespace's name (`cxdt-<pid>-<hex>`). */
  name: string;
  /** This machine's end of the veth. */
  hostIp: string;
  /** The namespace's end of the veth: the address processes inside listen on. */
  nsIp: string;
  hostDev: string;
  nsDev: string;
  /** Starts `cmd` inside the namespace (`ip netns exec`; the child is `cmd` itself, ip execs it). */
  spawn(cmd: string, args: string[], opts?: SpawnOptions): ChildProcess;
  /** Drops every frame in both directions, silently (no RST, no ICMP). */
  cut(): Promise<void>;
  /** Lets frames through again. */
  restore(): Promise<void>;
  /** Kills what runs inside, deletes the veth and the namespace. */
  destroy(): Promise<void>;
}

function sh(cmd: string, args: string[], input?: string): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", input, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
  return { ok: !r.error && r.status === 0, out: r.error ? r.error.message : `${r.stdout}${r.stderr}`.trim() };
}

function run(cmd: string, args: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? "ignore" : "pipe", "ignore", "pipe"] });
    if (input !== undefined) child.stdin!.on("error", () => undefined).end(input); // the exit code tells what went wrong
    let err = "";
    child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")}: exit ${String(code)}: ${err.trim()}`))));
  });
}

/** Drops every frame arriving on `dev` (netdev tables are per namespace and bound to the one device). */
const cutRuleset = (table: string, dev: string) =>
  `table netdev ${table} {\n  chain drop_in { type filter hook ingress device "${dev}" priority 0; policy drop; }\n}\n`;

let support: string | null | undefined;

/**
 * Why this machine cannot run partition tests (undefined when it can): it needs root, `ip` and
 * `nft`, and is checked by really creating a namespace, a veth pair and the cut's netdev chains
 * (once per process; a container without CAP_NET_ADMIN fails here, not halfway through a test).
 */
export function namespaceUnsupported(): string | undefined {
  if (support !== undefined) return support ?? undefined;
  support = probe() ?? null;
  return support ?? undefined;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "creating network namespaces needs root";
  for (const tool of ["ip", "nft"]) if (!sh(tool, ["-V"]).ok) return `\`${tool}\` is not installed (${tool === "ip" ? "iproute2" : "nftables"})`;
  // Named like a real test host, so that pruneOrphans also removes a probe a SIGKILL interrupted.
  const tag = randomBytes(3).toString("hex");
  const [ns, table, h, n] = [`${PREFIX}-${process.pid}-${tag}`, `${PREFIX}_${process.pid}_${tag}`, `cxh${tag}`, `cxn${tag}`];
  try {
    for (const args of [
      ["netns", "add", ns],
      ["link", "add", h, "type", "veth", "peer", "name", n],
      ["link", "set", n, "netns", ns],
    ]) {
      const r = sh("ip", args);
      if (!r.ok) return `\`ip ${args.join(" ")}\` failed: ${r.out}`;
    }
    const inside = sh("ip", ["netns", "exec", ns, "nft", "-f", "-"], cutRuleset(CUT_TABLE, n));
    const outside = sh("nft", ["-f", "-"], cutRuleset(table, h));
    if (!inside.ok || !outside.ok) return `nftables netdev ingress chains are not available: ${inside.out || outside.out}`;
    return undefined;
  } finally {
    sh("nft", ["delete", "table", "netdev", table]);
    sh("ip", ["link", "del", h]);
    sh("ip", ["netns", "del", ns]);
  }
}

// ---------------------------------------------------------------------------------------------
// Cleanup: at exit, and namespaces left behind by test processes that were SIGKILLed
// ---------------------------------------------------------------------------------------------

interface HostRecord {
  name: string;
  hostDev: string;
  /** The host side's netdev table (ours alone: bound to hostDev, named after the namespace). */
  hostTable: string;
  children: Set<ChildProcess>;
}
const hosts = new Set<HostRecord>();
let hooksInstalled = false;

function destroySync(h: HostRecord): void {
  // Processes inside would keep the namespace (and so the veth) alive after `ip netns del`.
  for (const c of h.children) c.kill("SIGKILL");
  sh("nft", ["delete", "table", "netdev", h.hostTable]);
  sh("ip", ["link", "del", h.hostDev]);
  sh("ip", ["netns", "del", h.name]);
  hosts.delete(h);
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", () => [...hosts].forEach(destroySync));
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = (): void => {
      [...hosts].forEach(destroySync);
      if (process.listenerCount(sig) === 1) {
        process.removeListener(sig, onSignal);
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, onSignal);
  }
}

/**
 * Deletes what SIGKILLed test processes left behind: `cxdt-<pid>-*` namespaces (their veths go
 * with them; their engines exit by themselves, see --parent-pid) and `cxdt_<pid>_*` host tables.
 */
function pruneOrphans(): void {
  const gone = (pid: string) => spawnSync("kill", ["-0", pid]).status !== 0;
  for (const m of sh("ip", ["netns", "list"]).out.matchAll(new RegExp(`^(${PREFIX}-(\\d+)-[0-9a-f]+)`, "gm")))
    if (gone(m[2]!)) sh("ip", ["netns", "del", m[1]!]);
  for (const m of sh("nft", ["list", "tables", "netdev"]).out.matchAll(new RegExp(`table netdev (${PREFIX}_(\\d+)_[0-9a-f]+)`, "g"))) {
    if (gone(m[2]!)) sh("nft", ["delete", "table", "netdev", m[1]!]);
  }
}

/** A /30 in 10.213.0.0/16 that no interface and no route here uses: [host address, namespace address]. */
function pickSubnet(): [string, string] {
  const inUse = `${sh("ip", ["-4", "-o", "addr", "show"]).out}\n${sh("ip", ["-4", "route", "show", "table", "all"]).out}`;
  for (let i = 0; i < 50; i++) {
    const b = randomBytes(2);
    const third = b[0]!;
    const base = b[1]! & 0xfc || 4; // not .0/30: keeps the addresses obviously ordinary
    const prefix = `10.213.${third}.`;
    const taken = [...inUse.matchAll(/10\.213\.(\d+)\.(\d+)/g)].some((m) => Number(m[1]) === third && Math.floor(Number(m[2]) / 4) * 4 === base);
    if (!taken) return [`${prefix}${base + 1}`, `${prefix}${base + 2}`];
  }
  throw new Error("no free /30 in 10.213.0.0/16");
}

/** Creates the namespace and the veth pair, both ends up and addressed; removed at exit. */
export async function createTestHost(): Promise<TestHost> {
  const why = namespaceUnsupported();
  if (why) throw new Error(`cannot create a test host: ${why}`);
  installHooks();
  pruneOrphans();
  const tag = randomBytes(3).toString("hex");
  const name = `${PREFIX}-${process.pid}-${tag}`;
  const hostDev = `cxh${tag}`;
  const nsDev = `cxn${tag}`;
  const children = new Set<ChildProcess>();
  const record: HostRecord = { name, hostDev, hostTable: `${PREFIX}_${process.pid}_${tag}`, children };
  hosts.add(record);
  const [hostIp, nsIp] = pickSubnet();
  try {
    for (const args of [
      ["netns", "add", name],
      ["link", "add", hostDev, "type", "veth", "peer", "name", nsDev],
      ["link", "set", nsDev, "netns", name],
    ])
      await run("ip", args);
    for (const args of [
      ["addr", "add", `${hostIp}/30`, "dev", hostDev],
      ["link", "set", hostDev, "up"],
    ])
      await run("ip", args);
    for (const args of [
      ["addr", "add", `${nsIp}/30`, "dev", nsDev],
      ["link", "set", nsDev, "up"],
      ["link", "set", "lo", "up"],
    ])
      await run("ip", ["-n", name, ...args]);
  } catch (err) {
    destroySync(record);
    throw err;
  }
  // Another run may have picked the same /30 between our check and our `addr add`: then retry.
  const clash = sh("ip", ["-4", "-o", "addr", "show"])
    .out.split("\n")
    .filter((l) => l.includes(` ${hostIp}/`) || l.includes(` ${nsIp}/`));
  if (clash.length > 1) {
    destroySync(record);
    return createTestHost();
  }

  return {
    name,
    hostIp,
    nsIp,
    hostDev,
    nsDev,
    spawn(cmd, args, opts = {}) {
      const child = spawn("ip", ["netns", "exec", name, cmd, ...args], opts);
      children.add(child);
      child.once("exit", () => children.delete(child));
      return child;
    },
    // Ingress on both ends, not egress: a frame dropped on its way out is an error the sender's
    // own kernel sees (TCP there gives up within seconds); dropped on arrival, nobody is told.
    async cut() {
      await run("ip", ["netns", "exec", name, "nft", "-f", "-"], cutRuleset(CUT_TABLE, nsDev));
      await run("nft", ["-f", "-"], cutRuleset(record.hostTable, hostDev));
    },
    async restore() {
      await run("nft", ["delete", "table", "netdev", record.hostTable]);
      await run("ip", ["netns", "exec", name, "nft", "delete", "table", "netdev", CUT_TABLE]);
    },
    async destroy() {
      const exits = [...children].map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(undefined) : c.once("exit", r))));
      destroySync(record);
      await Promise.all(exits);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The TS misbehaving engine (test/engines/ts), run inside a test host
// ---------------------------------------------------------------------------------------------

/** The part of engine-process.ts's EngineProcess that a namespaced engine has. */
export type NamespacedEngine = Pick<
  EngineProcess,
  "engineId" | "address" | "pid" | "control" | "registered" | "events" | "waitForEvent" | "logs" | "exitCode" | "kill9"
>;

function parseEvent(line: string): EngineEvent | undefined {
  try {
    const e = JSON.parse(line) as EngineEvent | null;
    return typeof e?.event === "string" ? e : undefined;
  } catch {
    return undefined; // not one of the engine's event lines
  }
}

/**
 * Starts test/engines/ts/misbehaving-engine.ts (compiled by engine-process.ts) inside `host`,
 * listening on `host.nsIp`, registering itself with `registry` (an address the namespace reaches:
 * contextd listening on `host.hostIp`). The same CLI, control file and stdout events as
 * engine-process.ts's startTsEngine, which runs engines in this namespace only.
 */
export async function startNamespacedEngine(
  host: TestHost,
  opts: { engineId: string; registry: string; owner: string; control?: EngineControl; heartbeatMs?: number },
): Promise<NamespacedEngine> {
  const entry = await compileTsEngine();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `contextd-nsengine-${opts.engineId}-`));
  const controlPath = path.join(dir, "control.json");
  const control = (c: EngineControl): void => {
    fs.writeFileSync(`${controlPath}.tmp`, JSON.stringify(c));
    fs.renameSync(`${controlPath}.tmp`, controlPath);
  };
  control(opts.control ?? {});
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONTEXTD_")) env[k] = v;
  env.CONTEXTD_LOG_LEVEL = process.env.TEST_ENGINE_LOG_LEVEL ?? "info";
  const args = [
    entry,
    "--engine-id",
    opts.engineId,
    "--control",
    controlPath,
    "--listen",
    `${host.nsIp}:0`,
    "--registry",
    opts.registry,
    "--owner",
    opts.owner,
    "--parent-pid",
    String(process.pid),
  ];
  if (opts.heartbeatMs !== undefined) args.push("--heartbeat-ms", String(opts.heartbeatMs));
  const child = host.spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });

  let output = "";
  let rest = "";
  let exitCode: number | null | undefined;
  const events: EngineEvent[] = [];
  const waiters = new Set<{ pred: (e: EngineEvent, i: number) => boolean; resolve: (e: EngineEvent) => void; reject: (e: Error) => void }>();
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
    rest += chunk;
    for (let nl = rest.indexOf("\n"); nl >= 0; nl = rest.indexOf("\n")) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      const e = parseEvent(line);
      if (!e) continue;
      const i = events.push(e) - 1;
      for (const w of [...waiters]) if (w.pred(e, i)) w.resolve(e);
    }
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) =>
    child.once("close", (code) => {
      exitCode = code;
      for (const w of [...waiters]) w.reject(new Error(`engine "${opts.engineId}" exited (code ${String(code)}); output:\n${output}`));
      fs.rmSync(dir, { recursive: true, force: true });
      resolve();
    }),
  );

  const waitForEvent = (pred: (e: EngineEvent, i: number) => boolean, timeoutMs = 10_000): Promise<EngineEvent> => {
    const found = events.find((e, i) => pred(e, i));
    if (found) return Promise.resolve(found);
    if (exitCode !== undefined) return Promise.reject(new Error(`engine "${opts.engineId}" has exited; output:\n${output}`));
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (e: EngineEvent) => (clearTimeout(timer), waiters.delete(w), resolve(e)),
        reject: (err: Error) => (clearTimeout(timer), waiters.delete(w), reject(err)),
      };
      const timer = setTimeout(() => w.reject(new Error(`no such event from engine "${opts.engineId}" within ${timeoutMs} ms; output:\n${output}`)), timeoutMs);
      waiters.add(w);
    });
  };

  const listening = await waitForEvent((e) => e.event === "listening", 30_000);
  const registered = waitForEvent((e) => e.event === "registered", 30_000).then(({ event: _e, ...outcome }) => outcome as unknown as RegistrationOutcome);
  registered.catch(() => undefined);
  return {
    engineId: opts.engineId,
    address: listening.address as string,
    pid: child.pid!,
    control,
    registered,
    events: () => [...events],
    waitForEvent,
    logs: () => output,
    exitCode: () => exitCode,
    kill9: async () => {
      if (exitCode === undefined) child.kill("SIGKILL");
      await exited;
    },
  };
}
