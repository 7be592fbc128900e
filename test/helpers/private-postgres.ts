/**
 * A PostgreSQL server of the test's own (Debian's initdb/pg_ctl from /usr/lib/postgresql/<v>/bin),
 * in a temp dir, on a free loopback port, that the test may stop and start at will — the shared
 * server at 127.0.0.1:5432 is never restarted (other tests use it).
 *
 *   const pg = await startPrivatePostgres();
 *   const url = pg.url("contextd");             // after pg.createDatabase("contextd")
 *   await pg.stop("immediate");                 // the database "crashes"
 *   await pg.start();                           // same data dir, same port
 *   await pg.destroy();
 *
 * initdb and the server refuse to run as root: as root, they run as the `postgres` user (the one
 * Debian's package creates), with the data dir owned by it. A missing PostgreSQL installation is an
 * error (the test fails).
 */
import { execFile, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { getFreePort } from "./free-port.js";

const run = promisify(execFile);

/** The newest /usr/lib/postgresql/<version>/bin with initdb and pg_ctl. */
export function postgresBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, "bin", "initdb")) && fs.existsSync(path.join(root, v, "bin", "pg_ctl")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)");
  return path.join(root, versions[0]!, "bin");
}

export interface PrivatePostgres {
  port: number;
  dataDir: string;
  /** postgres://postgres@127.0.0.1:<port>/<database>?<params> */
  url(database: string, params?: Record<string, string | number>): string;
  createDatabase(name: string): Promise<void>;
  running(): boolean;
  /** pg_ctl stop -m <mode> (default fast), waiting until it is down. */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  /** pg_ctl start, waiting until it accepts connections. */
  start(): Promise<void>;
  /** The server's log so far. */
  log(): string;
  destroy(): Promise<void>;
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** Runs a PostgreSQL binary, as `postgres` when we are root. */
async function pgRun(bin: string, args: string[], timeoutMs = 60_000): Promise<string> {
  const [cmd, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  try {
    const { stdout, stderr } = await run(cmd, argv, { timeout: timeoutMs, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8" } });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${path.basename(bin)} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-pg-"));
  const dataDir = path.join(tmp, "data");
  const logFile = path.join(tmp, "server.log");
  if (asRoot) {
    const chown = spawnSync("chown", ["-R", "postgres:postgres", tmp]);
    if (chown.status !== 0) throw new Error(`chown postgres ${tmp} failed: ${chown.stderr?.toString()}`);
  }
  await pgRun(path.join(bin, "initdb"), ["-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]);
  const port = await getFreePort();
  // Only loopback TCP and a socket in the temp dir (not the shared server's /var/run/postgresql).
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${tmp} -c max_connections=40 -c shared_buffers=16MB`;
  let isRunning = false;

  const self: PrivatePostgres = {
    port,
    dataDir,
    url(database, params = {}) {
      const u = new URL(`postgres://postgres@127.0.0.1:${port}/${database}`);
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
      return u.toString();
    },
    async createDatabase(name) {
      const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE ${name}`);
      } finally {
        await c.end();
      }
    },
    running: () => isRunning,
    async stop(mode = "fast") {
      await pgRun(path.join(bin, "pg_ctl"), ["stop", "-D", dataDir, "-m", mode, "-w", "-t", "60"]);
      isRunning = false;
    },
    async start() {
      await pgRun(path.join(bin, "pg_ctl"), ["start", "-D", dataDir, "-l", logFile, "-w", "-t", "60", "-o", options]);
      isRunning = true;
    },
    log: () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : ""),
    async destroy() {
      if (isRunning) await self.stop("immediate").catch(() => undefined);
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
  await self.start();
  process.once("exit", () => {
    if (isRunning)
      spawnSync(
        asRoot ? "runuser" : path.join(bin, "pg_ctl"),
        asRoot ? ["-u", "postgres", "--", path.join(bin, "pg_ctl"), "stop", "-D", dataDir, "-m", "immediate"] : ["stop", "-D", dataDir, "-m", "immediate"],
      );
  });
  return self;
}
