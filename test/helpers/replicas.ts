/**
 * Several real contextd processes ("replicas") on one store, each on a fixed loopback port that it
 * keeps across restarts (a load balancer's config names the ports once):
 *
 *   const db = await createScratchDatabase();
 *   const replicas = await startReplicas(3, { store: db.url() });
 *   const cx = new ContextdClient({ address: replicas[0].address });
 *   const stopped = await replicas[0].restart();   // SIGTERM, wait for the drain and exit, start again
 *   await stopReplicas(replicas);
 *
 * `configFor` gives one replica's own keys (its `engines.locality.replica`, say), deep-merged over
 * `config`:
 *
 *   await startReplicas(3, { store, config, configFor: (name) => ({ engines: { locality: { replica: name } } }) });
 *
 * Replicas run no managed sidecars; a test that needs an engine starts one and registers it at a
 * replica (test/replicas/registry-sync.test.ts: registry state shared across replicas).
 */
import { deepMerge, startContextd, type ContextdProcess, type StartContextdOptions } from "./contextd-process.js";
import { getFreePort } from "./free-port.js";

export interface ReplicaOptions {
  /** The store URL every replica uses (a scratch PostgreSQL database). */
  store: string;
  /** Merged over the harness's base config, for every replica. */
  config?: Record<string, unknown>;
  /** One replica's own config (by its name, r1, r2, ...), deep-merged over `config`. */
  configFor?: (name: string) => Record<string, unknown>;
  env?: Record<string, string>;
}

export interface StopOutcome {
  /** contextd's exit code (0 after a clean drain). */
  exitCode: number | null;
  /** What the stopped process logged (pino lines). */
  logLines: Array<Record<string, unknown>>;
  /** From SIGTERM to exit. */
  ms: number;
}

export interface Replica {
  /** r1, r2, ... (the `server` names of docs/deploy/haproxy.cfg). */
  readonly name: string;
  /** 127.0.0.1:<port>, the same across restarts. */
  readonly address: string;
  /** The process running now (a new one after each restart). */
  readonly current: ContextdProcess;
  /** Every process this replica ran, oldest first. */
  readonly history: ContextdProcess[];
  /** SIGTERM and wait for the exit (SIGKILL after `graceMs`, default 30 s). */
  stop(graceMs?: number): Promise<StopOutcome>;
  /** Starts a new process on the same port (after stop()). */
  start(): Promise<ContextdProcess>;
  /** stop() then start(). */
  restart(): Promise<StopOutcome>;
}

export async function startReplicas(count: number, options: ReplicaOptions): Promise<Replica[]> {
  const replicas: Replica[] = [];
  for (let i = 1; i <= count; i++) replicas.push(makeReplica(`r${i}`, await getFreePort(), options));
  // All at once: the schema migration runs under an advisory lock however many start together.
  await Promise.all(replicas.map((r) => r.start()));
  return replicas;
}

export async function stopReplicas(replicas: Replica[]): Promise<void> {
  await Promise.all(replicas.flatMap((r) => r.history.map((p) => p.cleanup())));
}

function makeReplica(name: string, port: number, options: ReplicaOptions): Replica {
  const address = `127.0.0.1:${port}`;
  const history: ContextdProcess[] = [];
  const config = deepMerge(options.config ?? {}, options.configFor?.(name));
  const startOptions: StartContextdOptions = {
    config: {
      ...config,
      listen: address,
      store: options.store,
      engines: { managed: [], ...(config.engines as Record<string, unknown> | undefined) },
    },
    env: options.env,
  };
  const replica: Replica = {
    name,
    address,
    get current() {
      const p = history.at(-1);
      if (!p) throw new Error(`replica ${name} was never started`);
      return p;
    },
    history,
    async stop(graceMs = 30_000) {
      const p = replica.current;
      const started = Date.now();
      const exitCode = await p.stop("SIGTERM", graceMs);
      return { exitCode, logLines: p.logLines(), ms: Date.now() - started };
    },
    async start() {
      const last = history.at(-1);
      if (last && last.exitCode() === undefined) throw new Error(`replica ${name} is still running`);
      const p = await startContextd(startOptions);
      if (p.address !== address) throw new Error(`replica ${name} listens on ${p.address}, not ${address}`);
      history.push(p);
      return p;
    },
    async restart() {
      const stopped = await replica.stop();
      await replica.start();
      return stopped;
    },
  };
  return replica;
}
