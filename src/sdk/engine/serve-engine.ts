import { lstat, unlink } from "node:fs/promises";
import { connect } from "node:net";
import { Server, type ServerCredentials } from "@grpc/grpc-js";
import { HealthImplementation } from "grpc-health-check";
import type { Logger } from "pino";
import { ContextEngineServiceService, type EngineInfo } from "../../contract/gen/contextd/v1/engine.js";
import type { RegisterEngineResponse } from "../../contract/gen/contextd/v1/registry.js";
import { buildEngineInfo, validateDefinition, type EngineDefinition } from "./engine-definition.js";
import { createEngineService } from "./engine-server.js";
import { HostChannels } from "./host-client.js";
import { formatHostPort, registrableHost, resolveOptions, unixPath, type ResolvedOptions, type ServeEngineOptions } from "./options.js";
import { Registrar, type RegistrationStatus } from "./registration.js";

/** A serving engine. */
export interface RunningEngine {
  /** What GetInfo answers (capabilities derived from the definition). */
  readonly info: EngineInfo;
  /** The bound address: host:port with the real port, or unix:/path. */
  readonly address: string;
  /** The endpoint registered with the registry (`advertise`, or the bound address). */
  readonly endpoint: string;
  /**
   * The first registration's outcome: the registry's answer, or a RegistrationError for a refusal
   * or a non-retryable status (the engine keeps serving). `null` when no registry is configured.
   * Awaiting it is optional: a rejection never goes unhandled.
   */
  readonly registered: Promise<RegisterEngineResponse | null>;
  /** Where registration stands now (`undefined` when no registry is configured). */
  readonly registration: RegistrationStatus | undefined;
  /** grpc.health.v1: SERVING or NOT_SERVING (for the whole server and ContextEngineService). */
  setHealth(serving: boolean): void;
  /**
   * Deregisters (unless `deregister: false`), turns health NOT_SERVING, lets in-flight calls finish
   * for up to `drainTimeoutMs` and then cancels them, and runs `onShutdown`. Idempotent.
   */
  stop(opts?: { deregister?: boolean }): Promise<void>;
}

const SERVICE_NAME = "contextd.v1.ContextEngineService";

/**
 * Serves an engine definition as a sidecar: ContextEngineService and grpc.health.v1 on `listen`,
 * registered with the registry when one is configured. See engine-sdk.ts for the overview.
 */
export async function serveEngine(def: EngineDefinition, options: ServeEngineOptions = {}): Promise<RunningEngine> {
  validateDefinition(def);
  const opts = resolveOptions(def.info.id, options);
  const log = opts.logger;
  const info = buildEngineInfo(def);

  const server = new Server({
    "grpc.max_receive_message_length": opts.maxMessageBytes,
    "grpc.max_send_message_length": opts.maxMessageBytes,
  });
  const hostChannels = new HostChannels(opts.credentials);
  server.addService(ContextEngineServiceService, createEngineService({ def, info, logger: log, hostChannels }));
  const health = new HealthImplementation({ "": "NOT_SERVING", [SERVICE_NAME]: "NOT_SERVING" });
  health.addToServer(server);
  const setHealth = (serving: boolean) => {
    for (const name of ["", SERVICE_NAME]) health.setStatus(name, serving ? "SERVING" : "NOT_SERVING");
  };

  const { address, endpoint } = await bind(server, opts, log);
  setHealth(true);

  const registrar = opts.registry
    ? new Registrar({
        registry: opts.registry,
        engineId: info.id,
        owner: opts.owner,
        ownerToken: opts.ownerToken,
        endpoint,
        instanceId: opts.instanceId,
        locality: opts.locality,
        allowSameOwnerRefresh: opts.allowSameOwnerRefresh,
        heartbeatMs: opts.heartbeatMs,
        credentials: opts.credentials,
        logger: log,
        retry: opts.retry,
      })
    : undefined;

  let stopping: Promise<void> | undefined;
  const signals: NodeJS.Signals[] = ["SIGTERM", "SIGINT"];
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, "signal received: deregistering and draining");
    running.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };

  const running: RunningEngine = {
    info,
    address,
    endpoint,
    registered: registrar ? registrar.registered : Promise.resolve(null),
    get registration() {
      return registrar?.status;
    },
    setHealth,
    stop(stopOpts = {}) {
      stopping ??= (async () => {
        for (const s of signals) process.off(s, onSignal);
        await registrar?.stop(stopOpts.deregister ?? true);
        setHealth(false);
        await drain(server, opts.drainTimeoutMs, log);
        hostChannels.close();
        if (opts.onShutdown) {
          try {
            await opts.onShutdown();
          } catch (err) {
            log.error({ err }, "onShutdown failed");
          }
        }
        log.info("engine stopped");
      })();
      return stopping;
    },
  };

  if (opts.handleSignals) for (const s of signals) process.on(s, onSignal);
  watchParent((options.env ?? process.env).CONTEXTD_PARENT_PID, log, () => running.stop({ deregister: false }).then(() => process.exit(0)));
  log.info({ address, endpoint, registry: opts.registry ?? null, capabilities: info.capabilities }, "engine listening");
  registrar?.start();
  return running;
}

/** Binds the server; port 0 picks one. Returns the real address and the endpoint to register. */
async function bind(server: Server, opts: ResolvedOptions, log: Logger): Promise<{ address: string; endpoint: string }> {
  const { listen } = opts;
  const target = listen.kind === "unix" ? listen.target : formatHostPort(listen.host, listen.port);
  if (listen.kind === "unix") await removeStaleSocket(unixPath(listen.target));
  const port = await bindAsync(server, target, opts.serverCredentials).catch((err: Error) => {
    throw new Error(`serveEngine: cannot listen on ${opts.listenText}: ${err.message}`);
  });
  if (listen.kind === "unix") return { address: listen.target, endpoint: opts.advertise ?? listen.target };
  const address = formatHostPort(listen.host, port);
  if (opts.advertise) return { address, endpoint: opts.advertise };
  const { host, wildcard } = registrableHost(listen.host);
  if (wildcard && opts.registry) {
    log.warn(
      { listen: opts.listenText },
      `listening on a wildcard address: registering ${host}; set \`advertise\` (CONTEXTD_ENGINE_ADVERTISE) if the registry runs elsewhere`,
    );
  }
  return { address, endpoint: formatHostPort(host, port) };
}

function bindAsync(server: Server, target: string, credentials: ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => server.bindAsync(target, credentials, (err, port) => (err ? reject(err) : resolve(port))));
}

/**
 * A socket file left by a previous run that crashed makes bind fail with EADDRINUSE. Remove it
 * when nothing answers on it; leave it (and let bind report the conflict) when something does.
 */
async function removeStaleSocket(path: string): Promise<void> {
  const stat = await lstat(path).catch(() => undefined);
  if (!stat?.isSocket()) return;
  const alive = await new Promise<boolean>((resolve) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
  if (!alive) await unlink(path).catch(() => undefined);
}

/** tryShutdown lets in-flight calls finish; after `timeoutMs` the rest are cancelled. */
function drain(server: Server, timeoutMs: number, log: Logger): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      log.warn({ timeoutMs }, "in-flight calls did not finish in time; cancelling them");
      server.forceShutdown();
      resolve();
    }, timeoutMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * A managed sidecar (started by contextd, which sets CONTEXTD_PARENT_PID) must not outlive a
 * contextd that was killed without a chance to stop it: poll the parent and stop when it is gone.
 */
function watchParent(parentPid: string | undefined, log: Logger, stop: () => Promise<unknown>): void {
  const pid = Number(parentPid);
  if (!parentPid || !Number.isInteger(pid) || pid <= 1) return;
  const timer = setInterval(() => {
    try {
      process.kill(pid, 0);
    } catch {
      clearInterval(timer);
      log.warn({ parentPid: pid }, "contextd (parent process) is gone; stopping");
      void stop();
    }
  }, 1_000);
  timer.unref();
}
