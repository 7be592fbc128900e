/**
 * Runs test/security/fixtures/host-token-engine.ts as a real process: bundled once per test process
 * with esbuild (a devDependency; npm packages stay external and resolve through a node_modules
 * symlink), then started with node and driven over stdin/stdout.
 *
 *   const engine = await startHostTokenEngine({ engineId: "e", registry: cd.address, owner: "acme", ownerToken });
 *   expect((await engine.registered).ok).toBe(true);
 *   void cx.assemble(...);                        // routed to the engine
 *   const host = await engine.nextHostContext();  // the call is held open now: its token is live
 *   ...HostService calls with host.token...
 *   engine.release(host.token);                   // the engine answers; the token dies with the call
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundledFixture } from "./bundle-fixture.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "../../..");
const FIXTURE = path.join(REPO_ROOT, "test/security/fixtures/host-token-engine.ts");

export interface EngineLine {
  event: string;
  [key: string]: unknown;
}

export interface HostContextLine {
  session_id: string;
  endpoint: string;
  token: string;
  expires_at_ms: number;
}

export interface HostTokenEngine {
  address: string;
  /** The first `registered` line (ok, refusal, message). */
  registered: Promise<EngineLine>;
  /** The next `host` line after the ones already taken: an Assemble held open, its HostContext. */
  nextHostContext(timeoutMs?: number): Promise<HostContextLine>;
  /** Lets the held Assemble that carries `token` answer. Resolves once the engine says it answers. */
  release(token: string): Promise<void>;
  /** stdout and stderr as written (the SDK logs to stderr). */
  logs(): string;
  /** stderr only: the SDK's log (stdout carries the protocol lines, host tokens included). */
  stderr(): string;
  stop(): Promise<void>;
}

export interface StartHostTokenEngineOptions {
  engineId: string;
  registry?: string;
  owner?: string;
  ownerToken?: string;
  /** Serve TLS with this certificate and key (files). */
  tls?: { cert: string; key: string };
  logLevel?: string;
}

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** The fixture as one ESM file in a temp dir whose node_modules is the repository's (for engines.managed commands too). */
export const hostTokenEngineEntry = bundledFixture(FIXTURE);

export async function startHostTokenEngine(opts: StartHostTokenEngineOptions): Promise<HostTokenEngine> {
  const entry = await hostTokenEngineEntry();
  const args = [entry, "--engine-id", opts.engineId];
  if (opts.registry) args.push("--registry", opts.registry, "--owner", opts.owner ?? "");
  if (opts.tls) args.push("--tls-cert", opts.tls.cert, "--tls-key", opts.tls.key);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONTEXTD_")) env[k] = v;
  env.CONTEXTD_LOG_LEVEL = opts.logLevel ?? "info";
  if (opts.ownerToken) env.CONTEXTD_OWNER_TOKEN = opts.ownerToken;
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
  live.add(child);

  let output = "";
  let errors = "";
  let rest = "";
  const lines: EngineLine[] = [];
  const waiters = new Set<{ pred: (l: EngineLine, i: number) => boolean; resolve: (l: EngineLine) => void; reject: (e: Error) => void }>();
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once("close", () => {
      exited = true;
      live.delete(child);
      for (const w of waiters) w.reject(new Error(`host-token engine exited; output:\n${output}`));
      resolve();
    }),
  );
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
    rest += chunk;
    for (let nl = rest.indexOf("\n"); nl >= 0; nl = rest.indexOf("\n")) {
      const text = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (!text.startsWith("{")) continue;
      const line = JSON.parse(text) as EngineLine;
      const i = lines.push(line) - 1;
      for (const w of [...waiters]) if (w.pred(line, i)) w.resolve(line);
    }
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
    errors += chunk;
  });

  const waitFor = (pred: (l: EngineLine, i: number) => boolean, timeoutMs = 15_000): Promise<EngineLine> => {
    const i = lines.findIndex(pred);
    if (i >= 0) return Promise.resolve(lines[i]!);
    if (exited) return Promise.reject(new Error(`host-token engine has exited; output:\n${output}`));
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (l: EngineLine) => (clearTimeout(timer), waiters.delete(w), resolve(l)),
        reject: (e: Error) => (clearTimeout(timer), waiters.delete(w), reject(e)),
      };
      const timer = setTimeout(
        () => w.reject(new Error(`timed out after ${timeoutMs} ms waiting for a line from the host-token engine; output:\n${output}`)),
        timeoutMs,
      );
      waiters.add(w);
    });
  };

  const listening = await waitFor((l) => l.event === "listening", 30_000);
  const registered = opts.registry
    ? waitFor((l) => l.event === "registered", 30_000)
    : Promise.resolve({ event: "registered", ok: false, refusal: "NO_REGISTRY" });
  registered.catch(() => undefined);
  let taken = -1;

  return {
    address: listening.address as string,
    registered,
    async nextHostContext(timeoutMs) {
      const line = await waitFor((l, i) => i > taken && l.event === "host", timeoutMs);
      taken = lines.indexOf(line);
      return line as unknown as HostContextLine;
    },
    async release(token) {
      child.stdin!.write(`${JSON.stringify({ release: token })}\n`);
      await waitFor((l) => l.event === "released" && l.token === token);
    },
    logs: () => output,
    stderr: () => errors,
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
