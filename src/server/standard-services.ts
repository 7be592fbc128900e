import { fileURLToPath } from "node:url";
import path from "node:path";
import type { Server, ServerUnaryCall, ServerWritableStream, sendUnaryData, UntypedServiceImplementation } from "@grpc/grpc-js";
import { status as grpcStatus } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { protoPath as healthProtoPath, service as healthService } from "grpc-health-check";
import type { Logger } from "pino";

/** The repository's proto/ directory (also shipped in the package): the source of truth. */
export const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../proto");

const CONTRACT_FILES = ["contextd/v1/session.proto", "contextd/v1/registry.proto", "contextd/v1/host.proto", "contextd/v1/engine.proto"];

export type ServingStatus = "SERVING" | "NOT_SERVING";

/**
 * contextd's grpc.health.v1 (Check, Watch, List) for service "" and each contextd service. Every
 * service has the same status, SERVING only while all of these hold:
 *
 * - contextd is listening (NOT_SERVING from construction until `listening()`);
 * - it is not draining (`drain()`, on SIGTERM: for good);
 * - its store answered the last ping (`storeReachable(false, why)` while PostgreSQL is down, the
 *   file cannot be read, ...; `storeReachable(true)` flips it back).
 *
 * Load balancers that health-check (HAProxy, Envoy, Kubernetes readiness probes, grpc-js clients
 * with a health-check config) stop sending calls to a replica that says NOT_SERVING; calls that
 * still arrive are served as usual (they fail with UNAVAILABLE on their own when the store is down).
 *
 * Watch streams get every change; `endWatches()` ends them (OK) so that a draining server does not
 * wait its whole grace period for streams that never finish on their own.
 */
export class ContextdHealth {
  private isListening = false;
  private isDraining = false;
  private storeProblem: string | undefined;
  private current: ServingStatus = "NOT_SERVING";
  private readonly watchers = new Set<{ service: string; call: ServerWritableStream<unknown, unknown> }>();
  private readonly services: Set<string>;
  private readonly listeners: Array<(status: ServingStatus, why: string) => void> = [];

  constructor(serviceNames: string[]) {
    this.services = new Set(["", ...serviceNames]);
  }

  get status(): ServingStatus {
    return this.current;
  }

  /** Why it is NOT_SERVING ("" when SERVING). */
  get reason(): string {
    if (this.isDraining) return "draining (shutting down)";
    if (!this.isListening) return "not listening yet";
    if (this.storeProblem !== undefined) return `store unreachable: ${this.storeProblem}`;
    return "";
  }

  /** Called on every change of the status, with the reason when NOT_SERVING. */
  onChange(listener: (status: ServingStatus, why: string) => void): void {
    this.listeners.push(listener);
  }

  listening(): void {
    this.isListening = true;
    this.update();
  }

  drain(): void {
    this.isDraining = true;
    this.update();
  }

  storeReachable(ok: boolean, why = "the store did not answer"): void {
    this.storeProblem = ok ? undefined : why;
    this.update();
  }

  /** Ends every Watch stream (after the last status was written). */
  endWatches(): void {
    for (const w of [...this.watchers]) {
      this.watchers.delete(w);
      w.call.end();
    }
  }

  addToServer(server: Server): void {
    const implementation: UntypedServiceImplementation = {
      check: (call: ServerUnaryCall<{ service?: string }, unknown>, callback: sendUnaryData<unknown>) => {
        const service = call.request.service ?? "";
        if (!this.services.has(service)) {
          callback({ code: grpcStatus.NOT_FOUND, details: `Health status unknown for service ${service}` }, null);
          return;
        }
        callback(null, { status: this.current });
      },
      watch: (call: ServerWritableStream<{ service?: string }, unknown>) => {
        const service = call.request.service ?? "";
        if (!this.services.has(service)) {
          // Per the health protocol: SERVICE_UNKNOWN, and the stream stays open.
          call.write({ status: "SERVICE_UNKNOWN" });
          return;
        }
        const watcher = { service, call: call as ServerWritableStream<unknown, unknown> };
        this.watchers.add(watcher);
        const forget = () => this.watchers.delete(watcher);
        call.on("cancelled", forget);
        call.on("error", forget);
        call.write({ status: this.current });
      },
      list: (_call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
        callback(null, { statuses: Object.fromEntries([...this.services].map((s) => [s, { status: this.current }])) });
      },
    };
    server.addService(healthService, implementation);
  }

  private update(): void {
    const next: ServingStatus = this.isListening && !this.isDraining && this.storeProblem === undefined ? "SERVING" : "NOT_SERVING";
    if (next === this.current) return;
    this.current = next;
    for (const w of this.watchers) w.call.write({ status: next });
    const why = this.reason;
    for (const l of this.listeners) l(next, why);
  }
}

/**
 * Pings the store every `store_ping_interval` and tells ContextdHealth whether it answered within
 * `store_ping_timeout`: a PostgreSQL server that is down, restarting or unreachable turns the health
 * NOT_SERVING within about one interval, and SERVING again after the first ping that succeeds. A
 * ping still outstanding when the next tick comes is not doubled (the tick is skipped). Logs one
 * warning when the store becomes unreachable (with the store's own message: PostgreSQL's address and
 * the driver's error) and one line when it answers again.
 */
export class StorePing {
  private timer: NodeJS.Timeout | undefined;
  private pending = false;
  private stopped = false;
  private down: string | undefined;

  constructor(
    private readonly store: { ping(): Promise<void> },
    private readonly health: ContextdHealth,
    private readonly settings: { storePingIntervalMs: number; storePingTimeoutMs: number },
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => void this.tick(), this.settings.storePingIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One ping (exported for tests through the class; the interval calls it). */
  async tick(): Promise<void> {
    if (this.pending || this.stopped) return;
    this.pending = true;
    const ping = this.store.ping();
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timeout = setTimeout(
        () => reject(new Error(`the store did not answer a ping within ${this.settings.storePingTimeoutMs} ms`)),
        this.settings.storePingTimeoutMs,
      );
    });
    try {
      await Promise.race([ping, timedOut]);
      this.report(undefined);
    } catch (err) {
      this.report(err instanceof Error ? err.message : String(err));
    } finally {
      clearTimeout(timeout);
    }
    // The next ping waits for this one to settle, even past its timeout (no pile-up on a hung server).
    await ping.catch(() => undefined);
    this.pending = false;
  }

  private report(problem: string | undefined): void {
    if (this.stopped) return;
    if (problem === undefined) {
      if (this.down !== undefined) this.log.info({ was: this.down }, "store reachable again: health SERVING");
    } else if (this.down === undefined) {
      this.log.warn({ reason: problem }, "store unreachable: health NOT_SERVING until a ping succeeds");
    }
    this.down = problem;
    this.health.storeReachable(problem === undefined, problem);
  }
}

/**
 * grpc.health.v1 (so load balancers, grpcurl and `contextctl health` can probe) and server
 * reflection (so grpcurl and Postman can discover the services without the .proto files).
 */
export function addStandardServices(server: Server, serviceNames: string[]): ContextdHealth {
  const health = new ContextdHealth(serviceNames);
  health.addToServer(server);
  const definitions = loadSync([...CONTRACT_FILES.map((f) => path.join(PROTO_DIR, f)), healthProtoPath], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
  });
  new ReflectionService(definitions).addToServer(server);
  return health;
}
