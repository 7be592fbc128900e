/**
 * The docker-compose stack, built and run for real (`npm run test:compose`; not part of `npm test`).
 *
 * 1. test/compose/prepare.sh, idempotently: a Docker daemon (started here when none answers) and the
 *    base images the Dockerfiles and docker-compose.yml name — real ones when present, otherwise
 *    look-alikes built from Debian's packages and Node 24 from the npm registry (no image registry here).
 * 2. `docker-compose --env-file <generated env> up -d --build`, exactly as docs/deployment.md "Docker
 *    Compose" says (fresh random secrets, the published port moved to a free one on 127.0.0.1), and
 *    all three services healthy by their own healthchecks.
 * 3. A session through the published port with the runtime client (ContextdClient): ListEngines shows
 *    lossless and window registered by their containers and SERVING; AppendMessages and Assemble are
 *    served by the lossless container; contextd is then recreated with the window engine in the slot
 *    and the same session (kept in the contextd-data volume) is assembled by the window container.
 * 4. The `postgres` profile: PostgreSQL, two contextd replicas on it, a window sidecar beside each and
 *    HAProxy; a session through HAProxy's published port, and both replicas read the same history
 *    from the database; the two sidecars are two instances of the engine `window` at both replicas,
 *    and with one SIGKILLed the other answers every call of an agent routed to it (none by legacy).
 * 5. `down -v`: containers, networks and volumes removed; images kept as the next run's cache.
 *
 * Each step's duration is printed. CONTEXTD_COMPOSE_KEEP=1 leaves the stack running after the test
 * (`docker-compose -p contextd-compose-test ps`); CONTEXTD_COMPOSE_STATE moves prepare.sh's state
 * directory (default /var/lib/contextd-compose). A dockerd that prepare.sh started stays up for the
 * next run, except under CI=true (or CONTEXTD_COMPOSE_STOP_DAEMON=1), where the test stops it.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth, ListEnginesRequest, RegistryServiceClient, type EngineStatus } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, textOf, user } from "../fixtures/messages.js";
import { getFreePort } from "../helpers/free-port.js";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PROJECT = "contextd-compose-test";
const PREPARE = path.join(REPO_ROOT, "test", "compose", "prepare.sh");
const KEEP = process.env.CONTEXTD_COMPOSE_KEEP === "1";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-compose-e2e-"));

// ---- processes ---------------------------------------------------------------------------------------

interface RunOptions {
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Appended to this file (the output is also in the error when the command fails). */
  log?: string;
  input?: string;
}

/** Runs a command; resolves with its stdout, rejects with the tail of its output on failure. */
function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: REPO_ROOT, env: opts.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let all = "";
    const log = opts.log ? fs.openSync(opts.log, "a") : undefined;
    if (log !== undefined) fs.writeSync(log, `\n$ ${cmd} ${args.join(" ")}\n`);
    const take = (chunk: Buffer, isOut: boolean) => {
      const s = chunk.toString();
      if (isOut) stdout += s;
      all = (all + s).slice(-20_000);
      if (log !== undefined) fs.writeSync(log, s);
    };
    child.stdout.on("data", (c: Buffer) => take(c, true));
    child.stderr.on("data", (c: Buffer) => take(c, false));
    // A command that exits without reading its input (most do) closes the pipe first: EPIPE on
    // stdin says nothing its exit code does not.
    child.stdin.on("error", () => {});
    child.stdin.end(opts.input ?? "");
    const timer = setTimeout(() => child.kill("SIGTERM"), opts.timeoutMs ?? 120_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (log !== undefined) fs.closeSync(log);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${cmd} ${args.join(" ")} exited ${code ?? signal}${opts.log ? ` (log: ${opts.log})` : ""}:\n${all.slice(-6_000)}`));
    });
  });
}

// ---- the env file and docker-compose -------------------------------------------------------------------

/** docker/.env.example with a fresh random value for every change-me-* placeholder, as docs/deployment.md says. */
function envFromExample(overrides: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of fs.readFileSync(path.join(REPO_ROOT, "docker", ".env.example"), "utf8").split("\n")) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!.startsWith("change-me-") ? randomBytes(32).toString("hex") : m[2]!;
  }
  return { ...env, ...overrides };
}

function writeEnvFile(name: string, vars: Record<string, string>): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(
    file,
    Object.entries(vars)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
    { mode: 0o600 },
  );
  return file;
}

interface Prepared {
  POSTGRES_IMAGE: string;
  IPTABLES: string;
  DOCKER_SERVER: string;
  /** "1" when prepare.sh started the daemon (it is stopped again under CI). */
  STARTED_DAEMON: string;
}

let prepared: Prepared;
let vars: Record<string, string>;
let envFile: string;
const composeLog = path.join(tmp, "compose.log");

/** docker-compose -p contextd-compose-test --env-file <envFile> [--profile postgres] ARGS. */
function compose(args: string[], opts: { profile?: boolean; timeoutMs?: number; file?: string } = {}): Promise<string> {
  // The shell's values would win over --env-file: leave out every variable the env file sets, and
  // anything that would point compose at another project, file or builder.
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!(k in vars) && !k.startsWith("COMPOSE_")) env[k] = v;
  env.COMPOSE_DOCKER_CLI_BUILD = "0"; // the daemon's own (classic) builder: no buildx needed
  const files = ["-f", path.join(REPO_ROOT, "docker-compose.yml")];
  // A daemon without iptables gives build containers no way out; they build on the host's network.
  if (prepared.IPTABLES === "false") files.push("-f", path.join(REPO_ROOT, "test", "compose", "host-network-build.yml"));
  const argv = ["-p", PROJECT, ...files, "--env-file", opts.file ?? envFile, ...(opts.profile ? ["--profile", "postgres"] : []), ...args];
  return run("docker-compose", argv, { env, timeoutMs: opts.timeoutMs ?? 180_000, log: composeLog });
}

interface ContainerState {
  service: string;
  status: string;
  health?: string;
}

async function states(services: string[], profile: boolean): Promise<ContainerState[]> {
  const out: ContainerState[] = [];
  for (const service of services) {
    const id = (await compose(["ps", "-q", service], { profile })).trim();
    if (!id) {
      out.push({ service, status: "missing" });
      continue;
    }
    const raw = await run("docker", ["inspect", "--format", "{{json .State}}", id]);
    const s = JSON.parse(raw) as { Status: string; Health?: { Status: string } };
    out.push({ service, status: s.Status, health: s.Health?.Status });
  }
  return out;
}

/** Waits until every service is healthy (or running, for one without a healthcheck). */
async function waitHealthy(services: string[], profile: boolean, timeoutMs = 240_000): Promise<ContainerState[]> {
  const until = Date.now() + timeoutMs;
  let last: ContainerState[] = [];
  for (;;) {
    last = await states(services, profile);
    if (last.every((s) => s.status === "running" && (s.health === undefined || s.health === "healthy"))) return last;
    const bad = last.find((s) => s.health === "unhealthy" || s.status === "exited" || s.status === "dead");
    if (bad || Date.now() > until) {
      const logs = await compose(["logs", "--no-color", "--tail", "40", ...services], { profile }).catch((e: Error) => e.message);
      throw new Error(`${bad ? `${bad.service} is ${bad.health ?? bad.status}` : "not healthy in time"}: ${JSON.stringify(last)}\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

// ---- gRPC --------------------------------------------------------------------------------------------

function listEngines(address: string, token: string): Promise<EngineStatus[]> {
  const client = new RegistryServiceClient(address, credentials.createInsecure());
  const md = new Metadata();
  md.set("authorization", `Bearer ${token}`);
  return new Promise<EngineStatus[]>((resolve, reject) => {
    client.listEngines(ListEnginesRequest.fromPartial({}), md, { deadline: new Date(Date.now() + 10_000) }, (err: ServiceError | null, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res.engines);
    });
  });
}

async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`${what} within ${timeoutMs / 1000} s; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

const serving = (engines: EngineStatus[], id: string) => engines.find((e) => e.engineId === id && e.health === EngineHealth.ENGINE_HEALTH_SERVING);

// ---- timings -----------------------------------------------------------------------------------------

const timings: Array<[string, number]> = [];
const started = Date.now();
async function timed<T>(step: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings.push([step, (Date.now() - t0) / 1000]);
    console.log(`[compose] ${step}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
}

// ---- the test ----------------------------------------------------------------------------------------

const DEFAULT_SERVICES = ["contextd", "lossless", "window"];
const POSTGRES_SERVICES = ["postgres", "contextd-replica-1", "contextd-replica-2", "window-1", "window-2", "contextd-lb"];

describe.sequential("the docker-compose stack, built and run", () => {
  let address: string;
  let replicasAddress: string;
  let tornDown = false;

  beforeAll(async () => {
    const out = await timed("prepare (daemon and base images)", () => run("bash", [PREPARE], { timeoutMs: 15 * 60_000, log: path.join(tmp, "prepare.log") }));
    prepared = Object.fromEntries(
      out
        .split("\n")
        .map((l) => /^([A-Z_]+)=(.*)$/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1]!, m[2]!]),
    ) as unknown as Prepared;
    expect(prepared.POSTGRES_IMAGE, out).toBeTruthy();
    console.log(`[compose] docker ${prepared.DOCKER_SERVER}, iptables ${prepared.IPTABLES}, PostgreSQL image ${prepared.POSTGRES_IMAGE}`);

    const [port, replicasPort] = [await getFreePort(), await getFreePort()];
    address = `127.0.0.1:${port}`;
    replicasAddress = `127.0.0.1:${replicasPort}`;
    vars = envFromExample({
      CONTEXTD_PUBLISH: address,
      CONTEXTD_REPLICAS_PUBLISH: replicasAddress,
      CONTEXTD_CONTEXT_ENGINE: "lossless",
      CONTEXTD_POSTGRES_IMAGE: prepared.POSTGRES_IMAGE,
    });
    envFile = writeEnvFile("compose.env", vars);
    // What an earlier run left behind (killed before its teardown).
    await compose(["down", "-v", "--remove-orphans", "--timeout", "5"], { profile: true });
  });

  afterAll(async () => {
    const total = (Date.now() - started) / 1000;
    if (!KEEP && !tornDown && envFile) {
      await timed("teardown", () => compose(["down", "-v", "--remove-orphans", "--timeout", "10"], { profile: true })).catch((e: Error) =>
        console.error(`[compose] teardown failed: ${e.message}`),
      );
    }
    // CI ends with nothing of its own left running; a developer's daemon stays up for the next run.
    if (!KEEP && prepared?.STARTED_DAEMON === "1" && (process.env.CI === "true" || process.env.CONTEXTD_COMPOSE_STOP_DAEMON === "1")) {
      await run("bash", [PREPARE, "--stop"], { timeoutMs: 60_000, log: path.join(tmp, "prepare.log") }).catch((e: Error) =>
        console.error(`[compose] stopping dockerd failed: ${e.message}`),
      );
    }
    console.log(`[compose] total ${total.toFixed(1)} s: ${timings.map(([s, t]) => `${s} ${t.toFixed(1)} s`).join("; ")}`);
    // The env files hold the (throwaway) stack's secrets; the logs stay for a look after a failure.
    if (!KEEP) for (const f of fs.readdirSync(tmp)) if (f.endsWith(".env")) fs.rmSync(path.join(tmp, f), { force: true });
    console.log(`[compose] logs: ${tmp}`);
  });

  it("`docker-compose --env-file <env> up -d --build` builds the images and all three services turn healthy", async () => {
    await timed("up -d --build", () => compose(["up", "-d", "--build"], { timeoutMs: 20 * 60_000 }));
    const s = await timed("until healthy", () => waitHealthy(DEFAULT_SERVICES, false));
    expect(s.map((x) => [x.service, x.health])).toEqual(DEFAULT_SERVICES.map((name) => [name, "healthy"]));
  });

  it("ListEngines through the published port: lossless and window registered by their containers, SERVING", async () => {
    const engines = await timed("engines SERVING", () =>
      eventually("lossless and window SERVING", async () => {
        const list = await listEngines(address, vars.CONTEXTD_RUNTIME_TOKEN!);
        return serving(list, "lossless") && serving(list, "window") ? list : undefined;
      }),
    );
    expect(serving(engines, "lossless")).toMatchObject({ owner: "lossless-team", endpoint: "lossless:50061" });
    expect(serving(engines, "window")).toMatchObject({ owner: "window-team", endpoint: "window:50062" });
    expect(engines.find((e) => e.engineId === "legacy")?.builtin).toBe(true);
  });

  const session = { sessionId: `compose-${Date.now()}`, agentId: "coder" };
  const said = ["Fix the failing test in src/app.ts", "It fails because add() returns a string.", "Now make it return a number."];

  it("AppendMessages and Assemble through the published port, served by the lossless container", async () => {
    const cx = new ContextdClient({ address, token: vars.CONTEXTD_RUNTIME_TOKEN });
    try {
      await timed("session (lossless)", async () => {
        await cx.appendMessages({ session, messages: [user(said[0]!), assistant(said[1]!)] });
        await cx.appendMessages({ session, messages: [user(said[2]!)] });
        const ctx = await cx.assemble({ session, tokenBudget: 32_000 });
        expect({ engine: ctx.engineId, mode: ctx.mode, reason: ctx.fallbackReason }).toEqual({ engine: "lossless", mode: Mode.MODE_NORMAL, reason: "" });
        expect(ctx.messages.map(textOf)).toEqual(said);
        expect(ctx.estimatedTokens).toBeGreaterThan(0);
      });
      // A wrong token is refused: auth is on in the compose config.
      const intruder = new ContextdClient({ address, token: "not-the-token" });
      await expect(intruder.assemble({ session, tokenBudget: 1000 })).rejects.toMatchObject({ code: 16 });
      intruder.close();
    } finally {
      cx.close();
    }
  });

  it("contextd recreated with the window engine in the slot: the same session, from the volume, assembled by the window container", async () => {
    const windowEnv = writeEnvFile("compose-window.env", { ...vars, CONTEXTD_CONTEXT_ENGINE: "window" });
    await timed("recreate contextd (window slot)", async () => {
      await compose(["up", "-d", "--no-deps", "contextd"], { file: windowEnv });
      await waitHealthy(["contextd"], false);
    });
    envFile = windowEnv; // what the stack now runs with
    const cx = new ContextdClient({ address, token: vars.CONTEXTD_RUNTIME_TOKEN });
    try {
      const ctx = await timed("session (window)", () =>
        eventually("the window engine serves the session", async () => {
          const list = await listEngines(address, vars.CONTEXTD_RUNTIME_TOKEN!);
          if (!serving(list, "window")) return undefined;
          const c = await cx.assemble({ session, tokenBudget: 32_000 });
          return c.engineId === "window" && c.mode === Mode.MODE_NORMAL ? c : undefined;
        }),
      );
      expect(ctx.messages.map(textOf)).toEqual(said);
    } finally {
      cx.close();
    }
  });

  it("the postgres profile: PostgreSQL, two replicas and HAProxy; a session through the load balancer, one history in both replicas", async () => {
    await timed("up -d --build (postgres profile)", () => compose(["up", "-d", "--build"], { profile: true, timeoutMs: 20 * 60_000 }));
    const s = await timed("until healthy (postgres profile)", () => waitHealthy(POSTGRES_SERVICES, true));
    expect(s.map((x) => [x.service, x.health ?? x.status])).toEqual([
      ["postgres", "healthy"],
      ["contextd-replica-1", "healthy"],
      ["contextd-replica-2", "healthy"],
      ["window-1", "healthy"],
      ["window-2", "healthy"],
      ["contextd-lb", "running"],
    ]);
    const version = await compose(["exec", "-T", "postgres", "psql", "-U", "contextd", "-d", "contextd", "-Atc", "show server_version"], { profile: true });
    console.log(`[compose] PostgreSQL ${version.trim()} (${prepared.POSTGRES_IMAGE})`);

    const replicated = { sessionId: `compose-replicas-${Date.now()}` };
    const lines = ["one", "two", "three", "four"].map((w) => `message ${w} through HAProxy`);
    const cx = new ContextdClient({ address: replicasAddress, token: vars.CONTEXTD_RUNTIME_TOKEN });
    try {
      await timed("session (replicas)", async () => {
        // HAProxy may still be starting (it resolves every server name first; on a daemon without
        // iptables the lookup of the absent contextd-replica-3 takes ~20 s) or bringing the replicas
        // in (rise 1 × inter 250 ms): retry the first call (with an idempotency key: a retry writes nothing twice), each time on a new
        // channel so that grpc-js's reconnect backoff does not stretch the wait.
        await eventually(
          "the first append through HAProxy",
          async () => {
            const first = new ContextdClient({ address: replicasAddress, token: vars.CONTEXTD_RUNTIME_TOKEN });
            try {
              await first.appendMessages({ session: replicated, messages: [user(lines[0]!)], idempotencyKey: "first" }, { timeoutMs: 5_000 });
              return true;
            } finally {
              first.close();
            }
          },
          120_000,
        );
        // One call each: HAProxy balances calls round robin over the two replicas.
        for (const [i, text] of lines.slice(1).entries()) {
          await cx.appendMessages({ session: replicated, messages: [i % 2 ? user(text) : assistant(text)] });
        }
        const ctx = await cx.assemble({ session: replicated, tokenBudget: 32_000 });
        expect({ engine: ctx.engineId, mode: ctx.mode }).toEqual({ engine: "legacy", mode: Mode.MODE_NORMAL });
        expect(ctx.messages.map(textOf)).toEqual(lines);
      });
    } finally {
      cx.close();
    }
    // Each replica, asked directly inside its container (its own 127.0.0.1:50051, its runtime token
    // from its environment), reads the same history from PostgreSQL.
    for (const replica of ["contextd-replica-1", "contextd-replica-2"]) {
      const out = await compose(["exec", "-T", replica, "node", "bin/contextctl.js", "transcript", replicated.sessionId, "--json"], { profile: true });
      // JSON Lines, one TranscriptEntry (proto JSON) per line, oldest first.
      const entries = out.split("\n").filter((l) => l.trim());
      for (const e of entries) JSON.parse(e);
      expect(
        entries.map((e) => lines.find((l) => e.includes(l)) ?? e),
        replica,
      ).toEqual(lines);
    }
  });

  it("the postgres profile's window sidecars are two instances of one engine at every replica; SIGKILL one and the other answers every call, none by legacy", async () => {
    const windowed = { sessionId: `compose-instances-${Date.now()}`, agentId: "windowed" };
    const instancesAt = async () => {
      const w = (await listEngines(replicasAddress, vars.CONTEXTD_RUNTIME_TOKEN!)).find((e) => e.engineId === "window");
      return (w?.instances ?? []).filter((i) => !i.quarantine).map((i) => `${i.instanceId}@${i.locality?.replica ?? ""}`);
    };
    // Each sidecar registered at its own replica; each replica applies the other's from PostgreSQL.
    // HAProxy sends each ListEngines to one replica or the other: ask until several answers agree.
    await timed("both instances at both replicas", () =>
      eventually(
        "window-1 and window-2 registered and serving at the replicas",
        async () => {
          for (let i = 0; i < 4; i++)
            if (JSON.stringify(await instancesAt()) !== JSON.stringify(["window-1@replica-1", "window-2@replica-2"])) return undefined;
          return true;
        },
        120_000,
      ),
    );
    const cx = new ContextdClient({ address: replicasAddress, token: vars.CONTEXTD_RUNTIME_TOKEN });
    const answers: Array<{ engineId: string; mode: Mode; fallbackReason: string }> = [];
    const assembleMany = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const a = await cx.assemble({ session: windowed, tokenBudget: 32_000 });
        answers.push({ engineId: a.engineId, mode: a.mode, fallbackReason: a.fallbackReason });
      }
    };
    try {
      await cx.appendMessages({ session: windowed, messages: ["one", "two", "three"].map((w, i) => (i % 2 ? assistant(w) : user(w))) });
      await timed("assembles, both instances up", () => assembleMany(10));
      await timed("SIGKILL window-1", () => compose(["kill", "-s", "SIGKILL", "window-1"], { profile: true }));
      await timed("assembles, window-1 killed", () => assembleMany(20));
      expect(answers.filter((a) => a.engineId !== "window" || a.mode !== Mode.MODE_NORMAL)).toEqual([]);
      // Started again (restart policy or by hand), it registers again and serves at both replicas.
      await compose(["start", "window-1"], { profile: true });
      await timed("window-1 back", () =>
        eventually("window-1 serving again", async () => ((await instancesAt()).includes("window-1@replica-1") ? true : undefined), 120_000),
      );
    } finally {
      cx.close();
    }
  });

  it("`docker-compose down -v` removes the containers and volumes", async () => {
    if (KEEP) return;
    await timed("teardown", () => compose(["down", "-v", "--remove-orphans", "--timeout", "10"], { profile: true }));
    tornDown = true;
    expect((await compose(["ps", "-q"], { profile: true })).trim()).toBe("");
    const volumes = await run("docker", ["volume", "ls", "-q", "--filter", `label=com.docker.compose.project=${PROJECT}`]);
    expect(volumes.trim()).toBe("");
  });
});
