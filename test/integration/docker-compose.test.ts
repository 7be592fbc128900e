/**
 * docker-compose.yml, its contextd config and the Dockerfiles, checked without a Docker engine:
 *
 * - `docker-compose config` (with and without `--profile postgres`, with the placeholder defaults, the
 *   checked-in docker/.env.example and a custom env file) exits 0 and yields the services, healthchecks,
 *   volumes, dependencies and per-service secrets that the stack needs; the `postgres` profile runs two
 *   contextd replicas on PostgreSQL behind HAProxy (docs/deploy/haproxy.cfg);
 * - docker/contextd.replica.yaml is a valid config under each replica's environment, and a real contextd
 *   on it (its store moved to a scratch PostgreSQL database) answers the replicas' healthcheck;
 * - docker/contextd.compose.yaml passes contextd's own config validation and auth setup with exactly
 *   the environment compose gives the contextd container, and admits the endpoints the engines advertise;
 * - a real contextd started from that config and environment answers the compose healthcheck commands,
 *   and the engines' probes (contextctl health, the Python grpcio one-liner) are real grpc.health.v1
 *   checks: exit 0 on SERVING, non-zero when nothing answers;
 * - both engines, started with their compose command and environment (registry address, ports and
 *   advertised host moved to loopback), register with that contextd for their owners and serve;
 * - every file the Dockerfiles COPY from the build context exists and is not excluded by .dockerignore.
 *
 * Needs `docker-compose` (Debian's 1.29 or the v2 standalone binary; .ci/run installs it) and Debian's
 * python3 with grpcio. Both versions' `config` output shapes are accepted (short and long syntax).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { EndpointAllowList } from "../../src/registry/endpoint-allow-list.js";
import { Authenticator } from "../../src/server/auth.js";
import { loadConfig } from "../../src/server/config.js";
import { parseDuration } from "../../src/server/duration.js";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { getFreePort } from "../helpers/free-port.js";
import { PYTHON } from "../helpers/python.js";

const run = promisify(execFile);
const COMPOSE_FILE = path.join(REPO_ROOT, "docker-compose.yml");
const CONFIG_FILE = path.join(REPO_ROOT, "docker", "contextd.compose.yaml");
const REPLICA_CONFIG_FILE = path.join(REPO_ROOT, "docker", "contextd.replica.yaml");
const HAPROXY_CONFIG_FILE = path.join(REPO_ROOT, "docs", "deploy", "haproxy.cfg");
const REPLICAS = ["contextd-replica-1", "contextd-replica-2"] as const;
const POSTGRES_PROFILE = ["postgres", ...REPLICAS, "contextd-lb"];
const ENV_EXAMPLE = path.join(REPO_ROOT, "docker", ".env.example");
const ENGINES = { lossless: "lossless-team", window: "window-team" } as const;
const TOKEN_VARS = ["CONTEXTD_ADMIN_TOKEN", "CONTEXTD_RUNTIME_TOKEN", "LOSSLESS_OWNER_TOKEN", "WINDOW_OWNER_TOKEN"];

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-compose-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** An env file for `--env-file`: an empty one stands for "no .env", so the file's own defaults apply. */
function envFile(name: string, vars: Record<string, string>): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(
    file,
    Object.entries(vars)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
  );
  return file;
}

interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  networks?: Record<string, unknown>;
}
interface Service {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string[] | string;
  environment?: Record<string, string | null> | string[];
  volumes?: Array<string | { type?: string; source?: string; target: string; read_only?: boolean }>;
  ports?: Array<string | { target: number; published?: string | number; host_ip?: string }>;
  networks?: Record<string, { aliases?: string[] } | null> | string[];
  depends_on?: Record<string, { condition?: string }> | string[];
  healthcheck?: { test?: string[] | string; interval?: string; disable?: boolean };
  profiles?: string[];
  stop_grace_period?: string;
}

/**
 * `docker-compose [--env-file F] [--profile P] -f docker-compose.yml config`, in a clean environment:
 * no COMPOSE_* or token variables from the developer's shell, and never the repository's own `.env`
 * (an explicit env file replaces it).
 */
async function composeConfig(opts: { profile?: string; envFile?: string } = {}): Promise<Compose> {
  const args = ["--env-file", opts.envFile ?? envFile("empty.env", {})];
  if (opts.profile) args.push("--profile", opts.profile);
  args.push("-f", COMPOSE_FILE, "config");
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? tmp, LANG: "C.UTF-8" };
  // execFile rejects on a non-zero exit, with stderr in the message: that is the exit-0 assertion.
  const { stdout } = await run("docker-compose", args, { cwd: REPO_ROOT, env, timeout: 60_000, maxBuffer: 8 << 20 });
  const doc = parseYaml(stdout) as Compose;
  expect(doc?.services, stdout).toBeTypeOf("object");
  return doc;
}

function envOf(s: Service): Record<string, string> {
  const out: Record<string, string> = {};
  if (Array.isArray(s.environment)) {
    for (const e of s.environment) out[e.split("=")[0]!] = e.slice(e.indexOf("=") + 1);
  } else {
    for (const [k, v] of Object.entries(s.environment ?? {})) out[k] = v ?? "";
  }
  return out;
}

/** Mounts as { source, target } whatever the syntax (v1 prints "src:dst:rw", v2 objects). */
function mountsOf(s: Service): Array<{ source: string; target: string }> {
  return (s.volumes ?? []).map((v) => {
    if (typeof v !== "string") return { source: v.source ?? "", target: v.target };
    const [source, target] = v.split(":");
    return { source: source!, target: target! };
  });
}

function networksOf(s: Service): string[] {
  return Array.isArray(s.networks) ? s.networks : Object.keys(s.networks ?? {});
}

function commandOf(s: Service): string[] {
  expect(Array.isArray(s.command), "commands are exec form (no shell)").toBe(true);
  return s.command as string[];
}

function healthTest(s: Service): string[] {
  const t = s.healthcheck?.test;
  expect(Array.isArray(t) && t[0] === "CMD", `healthcheck.test is ["CMD", ...]: ${JSON.stringify(t)}`).toBe(true);
  return (t as string[]).slice(1);
}

const portOf = (address: string) => Number(address.slice(address.lastIndexOf(":") + 1));

/** SIGTERM, then SIGKILL after 10 s; resolves once the child has exited. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

describe("docker-compose config", () => {
  let plain: Compose;
  let withPostgres: Compose;
  beforeAll(async () => {
    [plain, withPostgres] = await Promise.all([composeConfig(), composeConfig({ profile: "postgres" })]);
  });

  it("has contextd, lossless and window on one network, each with a healthcheck", () => {
    for (const name of ["contextd", "lossless", "window"]) {
      const s = plain.services[name];
      expect(s, name).toBeDefined();
      expect(s!.profiles ?? [], `${name} runs without a profile`).toEqual([]);
      expect(healthTest(s!).length, `${name} healthcheck`).toBeGreaterThan(0);
      expect(s!.healthcheck!.disable ?? false).toBe(false);
      expect(networksOf(s!), name).toEqual(["contextd"]);
    }
    expect(Object.keys(plain.networks ?? {})).toContain("contextd");
  });

  it("leaves the replicated setup out unless --profile postgres; with it, postgres:16 with a volume and a healthcheck", () => {
    // docker-compose 1.29 lists every service in `config` but starts a profiled one only with its
    // profile; v2 omits it. Either way it must carry the profile.
    for (const name of POSTGRES_PROFILE) {
      const without = plain.services[name];
      if (without) expect(without.profiles, name).toEqual(["postgres"]);
      expect(withPostgres.services[name], name).toBeDefined();
      expect(withPostgres.services[name]!.profiles, name).toEqual(["postgres"]);
    }
    const pg = withPostgres.services.postgres!;
    expect(pg.image).toBe("postgres:16");
    expect(mountsOf(pg)).toContainEqual({ source: "postgres-data", target: "/var/lib/postgresql/data" });
    expect(Object.keys(withPostgres.volumes ?? {})).toContain("postgres-data");
    expect(pg.healthcheck?.test).toContain("pg_isready -U contextd -d contextd");
    expect(networksOf(pg)).toEqual(["contextd"]);
    // The SQLite stack does not depend on it.
    for (const name of ["contextd", "lossless", "window"]) {
      const deps = withPostgres.services[name]!.depends_on ?? {};
      expect(Array.isArray(deps) ? deps : Object.keys(deps)).not.toContain("postgres");
      expect(withPostgres.services[name]).toBeDefined();
    }
  });

  it("the postgres profile runs two contextd replicas on PostgreSQL, each with its own host_endpoint and the same secrets", () => {
    const cd = withPostgres.services.contextd!;
    const cdEnv = envOf(cd);
    const pgEnv = envOf(withPostgres.services.postgres!);
    for (const name of REPLICAS) {
      const r = withPostgres.services[name]!;
      expect(r.image, name).toBe(cd.image);
      expect(commandOf(r)).toEqual(["node", "bin/contextd.js", "--config", "/etc/contextd/contextd.yaml"]);
      expect(mountsOf(r)).toContainEqual({ source: REPLICA_CONFIG_FILE, target: "/etc/contextd/contextd.yaml" });
      // No data volume: the store is the database.
      expect(mountsOf(r).map((m) => m.source)).not.toContain("contextd-data");
      const deps = r.depends_on;
      expect(Array.isArray(deps) ? undefined : deps?.postgres?.condition, `${name} waits for a healthy postgres`).toBe("service_healthy");
      const env = envOf(r);
      for (const v of TOKEN_VARS) expect(env[v], `${name} ${v}`).toBe(cdEnv[v]);
      expect(env.PGPASSWORD, "the database password reaches the driver as PGPASSWORD").toBe(pgEnv.POSTGRES_PASSWORD);
      expect(env.CONTEXTD_HOST_ENDPOINT, "engines call a replica back at its own address").toBe(`${name}:50051`);
      expect(healthTest(r)).toEqual(["node", "bin/contextctl.js", "health"]);
      // One DNS name for all replicas (DNS round robin inside the network).
      const nets = r.networks as Record<string, { aliases?: string[] } | null>;
      expect(Object.keys(nets)).toEqual(["contextd"]);
      expect(nets.contextd?.aliases).toContain("contextd-replicas");
      // Compose waits long enough for the drain (drain_delay + shutdown_grace) before it kills.
      const config = loadConfig({ file: REPLICA_CONFIG_FILE, env });
      const { drain_delay, shutdown_grace } = config.health;
      expect(parseDuration(r.stop_grace_period ?? "10s")).toBeGreaterThan(drain_delay + shutdown_grace);
    }
  });

  it("puts HAProxy with docs/deploy/haproxy.cfg in front of the replicas, published on the host's loopback", () => {
    const lb = withPostgres.services["contextd-lb"]!;
    expect(mountsOf(lb)).toContainEqual({ source: HAPROXY_CONFIG_FILE, target: "/usr/local/etc/haproxy/haproxy.cfg" });
    expect(commandOf(lb)).toEqual(["haproxy", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]);
    const env = envOf(lb);
    expect(env.CONTEXTD_LB_LISTEN).toBe("0.0.0.0:50051");
    expect([env.CONTEXTD_REPLICA_1, env.CONTEXTD_REPLICA_2]).toEqual(REPLICAS.map((r) => `${r}:50051`));
    // The config's three server lines all get an address (the third stays in maintenance: init-addr none).
    expect(env.CONTEXTD_REPLICA_3).toBeDefined();
    expect(fs.readFileSync(HAPROXY_CONFIG_FILE, "utf8")).toMatch(/init-addr libc,none/);
    const deps = lb.depends_on as Record<string, { condition?: string }>;
    for (const r of REPLICAS) expect(deps[r]?.condition, `contextd-lb waits for ${r}`).toBe("service_healthy");
    const port = lb.ports?.[0];
    const text = typeof port === "string" ? port : `${port?.host_ip}:${port?.published}:${port?.target}`;
    expect(text.replace(/\/tcp$/, "")).toBe("127.0.0.1:50052:50051");
    expect(networksOf(lb)).toEqual(["contextd"]);
  });

  it("docker/contextd.replica.yaml is a valid contextd config on PostgreSQL under each replica's environment", () => {
    for (const name of REPLICAS) {
      const env = envOf(withPostgres.services[name]!);
      const config = loadConfig({ file: REPLICA_CONFIG_FILE, env });
      expect(config.store).toMatch(/^postgres:\/\/contextd@postgres:5432\/contextd\b/);
      expect(config.store, "no password in the file").not.toContain(env.PGPASSWORD!);
      expect(config.host_endpoint).toBe(`${name}:50051`);
      expect(config.listen).toBe("0.0.0.0:50051");
      expect(config.engines.managed).toEqual([]);
      expect(config.auth.required).toBe(true);
      expect(new Authenticator(config.auth, env).required).toBe(true);
      // HAProxy needs up to fall × (inter + timeout check) = 1.5 s to see NOT_SERVING.
      expect(config.health.drain_delay).toBeGreaterThanOrEqual(1_500);
    }
  });

  it("runs contextd on its config file and a data volume, published on the host's loopback", () => {
    const cd = plain.services.contextd!;
    expect(commandOf(cd)).toEqual(["node", "bin/contextd.js", "--config", "/etc/contextd/contextd.yaml"]);
    const mounts = mountsOf(cd);
    expect(mounts).toContainEqual({ source: CONFIG_FILE, target: "/etc/contextd/contextd.yaml" });
    expect(mounts).toContainEqual({ source: "contextd-data", target: "/var/lib/contextd" });
    expect(Object.keys(plain.volumes ?? {})).toEqual(expect.arrayContaining(["contextd-data", "lossless-data"]));
    const port = cd.ports?.[0];
    const text = typeof port === "string" ? port : `${port?.host_ip}:${port?.published}:${port?.target}`;
    expect(text.replace(/\/tcp$/, "")).toBe("127.0.0.1:50051:50051");
    expect(healthTest(cd)).toEqual(["node", "bin/contextctl.js", "health"]);
  });

  it("starts each engine after a healthy contextd, registering <service>:<port> with its owner's token only", () => {
    const cdEnv = envOf(plain.services.contextd!);
    for (const [name, owner] of Object.entries(ENGINES)) {
      const s = plain.services[name]!;
      const env = envOf(s);
      expect(env.CONTEXTD_REGISTRY).toBe("contextd:50051");
      expect(env.CONTEXTD_OWNER).toBe(owner);
      const port = portOf(env.CONTEXTD_ENGINE_LISTEN!);
      expect(env.CONTEXTD_ENGINE_LISTEN).toBe(`0.0.0.0:${port}`);
      expect(env.CONTEXTD_ENGINE_ADVERTISE).toBe(`${name}:${port}`);
      const ownerVar = `${name.toUpperCase()}_OWNER_TOKEN`;
      expect(env.CONTEXTD_OWNER_TOKEN).toBe(cdEnv[ownerVar]);
      // Least privilege: no other token reaches an engine container.
      for (const v of TOKEN_VARS) expect(env[v], `${name} must not get ${v}`).toBeUndefined();
      expect(Object.values(env)).not.toContain(cdEnv.CONTEXTD_ADMIN_TOKEN);
      expect(Object.values(env)).not.toContain(cdEnv.CONTEXTD_RUNTIME_TOKEN);
      const deps = s.depends_on;
      expect(Array.isArray(deps) ? undefined : deps?.contextd?.condition, `${name} depends_on`).toBe("service_healthy");
      // The healthcheck probes the port the engine listens on.
      expect(healthTest(s).join(" ")).toContain(`127.0.0.1:${port}`);
    }
    expect(commandOf(plain.services.lossless!)).toEqual(["node", "dist/engines/lossless/main.js"]);
    expect(plain.services.lossless!.image).toBe(plain.services.contextd!.image);
    expect(envOf(plain.services.lossless!).LOSSLESS_DB).toBe("/var/lib/lossless/lossless.db");
    expect(mountsOf(plain.services.lossless!)).toContainEqual({ source: "lossless-data", target: "/var/lib/lossless" });
    expect(commandOf(plain.services.window!)).toEqual(["python3", "engines/window/main.py"]);
    expect(plain.services.window!.build?.dockerfile).toBe("docker/window.Dockerfile");
  });

  it("the engines' commands name files of the repository", () => {
    expect(fs.existsSync(path.join(REPO_ROOT, "engines/lossless/main.ts")), "engines/lossless/main.ts").toBe(true);
    expect(fs.existsSync(path.join(REPO_ROOT, "engines/window/main.py")), "engines/window/main.py").toBe(true);
  });

  it("falls back to docker/.env.example's placeholders, and takes the tokens from --env-file", async () => {
    const example = Object.fromEntries(
      fs
        .readFileSync(ENV_EXAMPLE, "utf8")
        .split("\n")
        .filter((l) => /^[A-Z_][A-Z0-9_]*=/.test(l))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    for (const v of [...TOKEN_VARS, "POSTGRES_PASSWORD"]) expect(example[v], `${v} in .env.example`).toMatch(/^change-me-/);
    const fromExample = await composeConfig({ envFile: ENV_EXAMPLE, profile: "postgres" });
    expect(fromExample).toEqual(withPostgres);

    const mine = Object.fromEntries(TOKEN_VARS.map((v, i) => [v, `token-${i}-${v.toLowerCase()}`]));
    const custom = await composeConfig({
      envFile: envFile("custom.env", { ...mine, CONTEXTD_CONTEXT_ENGINE: "lossless", CONTEXTD_PUBLISH: "127.0.0.1:6000" }),
    });
    const cdEnv = envOf(custom.services.contextd!);
    for (const v of TOKEN_VARS) expect(cdEnv[v]).toBe(mine[v]);
    expect(cdEnv.CONTEXTD_SLOTS__CONTEXT_ENGINE).toBe("lossless");
    expect(envOf(custom.services.lossless!).CONTEXTD_OWNER_TOKEN).toBe(mine.LOSSLESS_OWNER_TOKEN);
    expect(envOf(custom.services.window!).CONTEXTD_OWNER_TOKEN).toBe(mine.WINDOW_OWNER_TOKEN);
    const port = custom.services.contextd!.ports?.[0];
    expect(typeof port === "string" ? port : `${port?.host_ip}:${port?.published}`).toMatch(/^127\.0\.0\.1:6000/);
  });

  it("docker/contextd.compose.yaml is a valid contextd config under the contextd container's environment", async () => {
    const env = envOf(plain.services.contextd!);
    const config = loadConfig({ file: CONFIG_FILE, env });
    expect(config.listen).toBe("0.0.0.0:50051");
    expect(config.host_endpoint).toBe("contextd:50051");
    expect(config.store).toBe("sqlite:/var/lib/contextd/contextd.db");
    expect(mountsOf(plain.services.contextd!).some((m) => config.store.includes(`${m.target}/`) && m.source === "contextd-data")).toBe(true);
    expect(config.slots.context_engine).toBe("legacy");
    expect(config.engines.managed).toEqual([]);
    expect(config.auth.required).toBe(true);
    expect(Object.keys(config.auth.owners).sort()).toEqual(Object.values(ENGINES).sort());
    expect(config.auth.operators.length).toBeGreaterThan(0);
    expect(config.auth.runtimes.length).toBeGreaterThan(0);
    // Every token_env is set (and the owners' tokens differ), or this throws like contextd's start would.
    const auth = new Authenticator(config.auth, env);
    expect(auth.required).toBe(true);
    // The registry admits exactly what the engines advertise, and not an arbitrary host. In compose a
    // service name resolves to a private address of the contextd network, which a listed name may
    // resolve to only when an IP entry allows it: each engine's address is pinned and listed.
    const pinned = new Map<string, string>();
    for (const name of Object.keys(ENGINES)) {
      const nets = plain.services[name]!.networks as Record<string, { ipv4_address?: string } | null> | undefined;
      const address = nets?.contextd?.ipv4_address;
      expect(address, `services.${name}.networks.contextd.ipv4_address`).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(config.engines.allow_endpoints, name).toContain(address);
      pinned.set(name, address!);
    }
    const allow = new EndpointAllowList(config.engines.allow_endpoints, async (host) => {
      const address = pinned.get(host);
      if (!address) throw new Error(`${host} does not resolve`);
      return [{ address, family: 4 }];
    });
    for (const name of Object.keys(ENGINES)) {
      const advertised = envOf(plain.services[name]!).CONTEXTD_ENGINE_ADVERTISE!;
      expect(await allow.check(advertised), advertised).toMatchObject({ ok: true });
    }
    expect(await allow.check("example.com:50051")).toMatchObject({ ok: false });
    expect(await allow.check("postgres:5432")).toMatchObject({ ok: false });
  });

  describe("a contextd on that config and environment, probed with the compose healthcheck commands", () => {
    let cd: ContextdProcess;
    beforeAll(async () => {
      const file = parseYaml(fs.readFileSync(CONFIG_FILE, "utf8")) as Record<string, unknown>;
      // Only the addresses and the data file move (the harness gives a free port and a temp dir).
      delete file.listen;
      delete file.metrics_listen;
      delete file.store;
      cd = await startContextd({ config: file, env: envOf(plain.services.contextd!) });
    });
    afterAll(async () => {
      await cd?.cleanup();
    });

    /** Runs a healthcheck's argv with `from` replaced by `to`; resolves with the exit code. */
    async function probe(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
      const [cmd, ...args] = argv;
      const program = cmd === "node" ? process.execPath : cmd === "python3" ? PYTHON : cmd!;
      try {
        const r = await run(program, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, timeout: 30_000 });
        return { code: 0, out: r.stdout + r.stderr };
      } catch (e) {
        const err = e as { code?: number; stdout?: string; stderr?: string };
        return { code: typeof err.code === "number" ? err.code : -1, out: `${err.stdout ?? ""}${err.stderr ?? ""}` };
      }
    }
    const retarget = (argv: string[], from: string, to: string) => argv.map((a) => a.split(from).join(to));

    it("contextd's healthcheck exits 0 (SERVING)", async () => {
      // In the container contextctl's default address 127.0.0.1:50051 is contextd; here the harness's port.
      const r = await probe(healthTest(plain.services.contextd!), { CONTEXTD_ADDRESS: cd.address });
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain("SERVING");
    });

    it("the engines' probes are grpc.health.v1 checks: 0 on SERVING, non-zero when nothing answers", async () => {
      const closed = `127.0.0.1:${await getFreePort()}`;
      for (const name of Object.keys(ENGINES)) {
        const argv = healthTest(plain.services[name]!);
        const own = envOf(plain.services[name]!).CONTEXTD_ENGINE_LISTEN!.replace("0.0.0.0", "127.0.0.1");
        const serving = await probe(retarget(argv, own, cd.address));
        expect(serving.code, `${name}: ${serving.out}`).toBe(0);
        const down = await probe(retarget(argv, own, closed));
        expect(down.code, `${name} against a closed port`).not.toBe(0);
      }
    });

    it("both engines, run with their compose command and environment, register for their owners and serve", async () => {
      // Only what needs Docker's network changes: the registry address, a free port on loopback, an
      // advertised `localhost:<port>` (also in allow_endpoints) instead of the service name, and the DB path.
      const children: ChildProcess[] = [];
      const output: Record<string, string> = {};
      const endpoints: Record<string, string> = {};
      try {
        for (const name of Object.keys(ENGINES)) {
          const s = plain.services[name]!;
          const port = await getFreePort();
          endpoints[name] = `localhost:${port}`;
          const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CONTEXTD_")));
          const env = {
            ...inherited,
            ...envOf(s),
            CONTEXTD_REGISTRY: cd.address,
            CONTEXTD_ENGINE_LISTEN: `127.0.0.1:${port}`,
            CONTEXTD_ENGINE_ADVERTISE: endpoints[name]!,
            WINDOW_PARENT_PID: String(process.pid),
            ...(envOf(s).LOSSLESS_DB ? { LOSSLESS_DB: path.join(tmp, `${name}.db`) } : {}),
          };
          const [cmd, ...args] = commandOf(s);
          const program = cmd === "node" ? process.execPath : cmd === "python3" ? PYTHON : cmd!;
          const child = spawn(program, args, { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
          output[name] = "";
          child.stdout!.on("data", (c: Buffer) => (output[name] += c.toString()));
          child.stderr!.on("data", (c: Buffer) => (output[name] += c.toString()));
          children.push(child);
        }
        const admin = envOf(plain.services.contextd!).CONTEXTD_ADMIN_TOKEN!;
        const deadline = Date.now() + 60_000;
        let engines: Array<{ engineId: string; owner: string; endpoint?: string; health: string }> = [];
        for (;;) {
          const r = await run(process.execPath, ["bin/contextctl.js", "engines", "--json", "--address", cd.address, "--token", admin], {
            cwd: REPO_ROOT,
            timeout: 30_000,
          });
          engines = (JSON.parse(r.stdout) as { engines: typeof engines }).engines;
          const ready = Object.entries(ENGINES).every(([id, owner]) =>
            engines.some((e) => e.engineId === id && e.owner === owner && e.endpoint === endpoints[id] && e.health === "ENGINE_HEALTH_SERVING"),
          );
          if (ready) break;
          const gone = children.findIndex((c) => c.exitCode !== null || c.signalCode !== null);
          if (gone >= 0) {
            const name = Object.keys(ENGINES)[gone]!;
            throw new Error(`${name} exited (${children[gone]!.exitCode ?? children[gone]!.signalCode}):\n${output[name]}`);
          }
          if (Date.now() > deadline)
            throw new Error(`engines not registered and SERVING within 60 s: ${JSON.stringify(engines)}\n${JSON.stringify(output, null, 2)}`);
          await new Promise((r) => setTimeout(r, 500));
        }
      } finally {
        await Promise.all(children.map((c) => stopChild(c)));
      }
    });
  });
});

describe("a replica of the postgres profile, on its config and environment, with a scratch PostgreSQL database", () => {
  let db: ScratchDatabase;
  let cd: ContextdProcess;
  let replica: Service;
  beforeAll(async () => {
    replica = (await composeConfig({ profile: "postgres" })).services[REPLICAS[0]]!;
    db = await createScratchDatabase();
    const file = parseYaml(fs.readFileSync(REPLICA_CONFIG_FILE, "utf8")) as Record<string, unknown>;
    // Only the addresses and the database move (a free port, a scratch database on this machine);
    // the container's host_endpoint is its service name, which only Docker's network resolves.
    delete file.listen;
    delete file.metrics_listen;
    file.store = db.url({ pool_max: 2 });
    const env = envOf(replica);
    delete env.CONTEXTD_HOST_ENDPOINT;
    delete env.PGPASSWORD;
    cd = await startContextd({ config: file, env });
  });
  afterAll(async () => {
    await cd?.cleanup();
    await db?.drop();
  });

  it("starts on PostgreSQL and answers the replicas' healthcheck (SERVING)", async () => {
    expect(cd.logLines().find((l) => l.msg === "contextd listening")).toMatchObject({ store: "postgres" });
    const [cmd, ...args] = healthTest(replica);
    expect(cmd).toBe("node");
    const r = await run(process.execPath, args, { cwd: REPO_ROOT, env: { ...process.env, CONTEXTD_ADDRESS: cd.address }, timeout: 30_000 });
    expect(r.stdout + r.stderr).toContain("SERVING");
  });
});

describe("Dockerfiles", () => {
  /** .dockerignore as simple top-level patterns (what this repository's file uses). */
  const ignored = fs
    .readFileSync(path.join(REPO_ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#") && !l.startsWith("!"));
  const isIgnored = (p: string) =>
    ignored.some((pat) => {
      const re = new RegExp(
        `^${pat
          .replace(/[.+^${}()|[\]\\]/g, "\\$&")
          .replace(/\*\*\//g, "(.*/)?")
          .replace(/\*/g, "[^/]*")}(/.*)?$`,
      );
      return re.test(p);
    });

  /** The sources of every COPY without --from, and the CMD. */
  function parseDockerfile(file: string): { copies: string[]; cmd: string[] } {
    const text = fs.readFileSync(path.join(REPO_ROOT, file), "utf8").replace(/\\\n/g, " ");
    const copies: string[] = [];
    let cmd: string[] = [];
    for (const line of text.split("\n")) {
      const m = /^\s*COPY\s+(.*)$/i.exec(line);
      if (m) {
        const words = m[1]!.trim().split(/\s+/);
        if (words.some((w) => w.startsWith("--from"))) continue;
        const paths = words.filter((w) => !w.startsWith("--"));
        copies.push(...paths.slice(0, -1));
      }
      const c = /^\s*CMD\s+(\[.*\])\s*$/.exec(line);
      if (c) cmd = JSON.parse(c[1]!) as string[];
    }
    return { copies, cmd };
  }

  it.each([["Dockerfile"], ["docker/window.Dockerfile"]])("%s copies only files that exist and are in the build context", (file) => {
    const { copies } = parseDockerfile(file);
    expect(copies.length).toBeGreaterThan(0);
    for (const src of copies) {
      expect(fs.existsSync(path.join(REPO_ROOT, src)), `${file}: COPY ${src}`).toBe(true);
      expect(isIgnored(src), `${file}: COPY ${src} is excluded by .dockerignore`).toBe(false);
    }
  });

  it("the root image runs contextd on /etc/contextd/contextd.yaml; the window image runs the engine", () => {
    expect(parseDockerfile("Dockerfile").cmd).toEqual(["node", "bin/contextd.js", "--config", "/etc/contextd/contextd.yaml"]);
    expect(parseDockerfile("docker/window.Dockerfile").cmd).toEqual(["python3", "engines/window/main.py"]);
    expect(isIgnored("node_modules")).toBe(true);
    expect(isIgnored("docker/.env")).toBe(true);
    expect(isIgnored("dist")).toBe(true);
  });
});
